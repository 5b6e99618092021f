"""Writes fake_two.jsonl: a HAND-WRITTEN FIXTURE session (not a real LLM's output)
for the C++ unit tests (src/search/search_test.cc, test Replay.*), which replay
it through the real `replay:` provider against tests/support/fake_evaluator:
kernels carry `# FAKE: ...` markers that the fake evaluator turns into verdicts.

Run: python3 examples/sessions/make_fake_two.py
"""
import json
import pathlib

HERE = pathlib.Path(__file__).parent


def sub(name):
    return (f"import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def __init__(self, n):\n"
            f"        super().__init__()\n        self.n = n  # {name}\n\n    def forward(self, x):\n        return x\n\n\n"
            f"def get_inputs():\n    return [torch.randn(4, 8)]\n\n\ndef get_init_inputs():\n    return [8]\n")


TOP = ("import torch.nn as nn\n\nfrom subkernel_problems.alpha import Model as Alpha\n"
       "from subkernel_problems.beta import Model as Beta\n\n\nclass ModelNew(nn.Module):\n"
       "    def __init__(self, n):\n        super().__init__()\n        self.alpha = Alpha(n)\n        self.beta = Beta(n)\n\n"
       "    def forward(self, x):\n        return self.beta(self.alpha(x))\n")


def block(path, src):
    return "```python file=%s\n%s```\n" % (path, src)


def kernel(marker):
    return block("kernel.py", f"# FAKE: {marker}\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    pass\n")


def main():
    lines = ["# HAND-WRITTEN FIXTURE session for search_test.cc Replay.* (see make_fake_two.py)."]
    lines.append(json.dumps({"agent": "decompose", "task": "tiny",
                             "text": block("decomposed_problem.py", TOP) + block("subkernel_problems/alpha.py", sub("alpha"))
                             + block("subkernel_problems/beta.py", sub("beta"))}))
    for task, gen, better in (("alpha", "incorrect", "correct speedup=1.5 base=2"),
                              ("beta", "correct speedup=1.2", "correct speedup=1.3")):
        for _ in range(16):
            lines.append(json.dumps({"agent": "generate", "task": task, "text": kernel(gen)}))
            lines.append(json.dumps({"agent": "debug", "task": task, "text": kernel(better)}))
            lines.append(json.dumps({"agent": "optimize", "task": task, "text": kernel(better)}))
    (HERE / "fake_two.jsonl").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
