"""An `exec:` LLM for the end-to-end tests: answers from a HAND-WRITTEN FIXTURE
session in the replay format's scripted form (docs/LLM.md) by agent and task,
the first line whose `prompt_contains` guard (if any) the prompt holds. Stateless,
so it serves sessions whose lines for one (agent, task) differ only by guard
(examples/sessions/messy_cpu.jsonl). Extra arguments (`--api-key ...`) are
ignored: tests put credentials on its command line to see where they travel.

    exec:python3 tests/e2e/lib/exec_replay.py SESSION.jsonl [ignored ...]
"""
import json
import os
import sys


def main() -> int:
    session = sys.argv[1]
    prompt = sys.stdin.read()
    agent, task = os.environ.get("MKEVOLVE_AGENT", ""), os.environ.get("MKEVOLVE_TASK", "")
    with open(session, encoding="utf-8") as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            e = json.loads(line)
            if e.get("agent") not in ("", None, agent) or e.get("task") not in ("", None, task):
                continue
            if e.get("prompt_contains") and e["prompt_contains"] not in prompt:
                continue
            print(e["text"])
            return 0
    print(f"(exec_replay: nothing scripted for agent {agent!r}, task {task!r})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
