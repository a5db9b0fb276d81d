"""Every fenced code block of README.md and docs/*.md runs: python blocks in order, one process per file (a block may
use what an earlier one of its file defined); C and C++ blocks that are whole programs (an `int main`) are compiled
and run, and so are those marked `<!-- snippet: main -->` (their body is wrapped in main, their #include lines kept
in front); `<!-- snippet: kernel -->` blocks are kernel-dialect sources, compiled by runtime.Module. A block that
cannot run alone says why on the line before its fence: `<!-- snippet: skip (reason) -->`. Blocks of other languages
(text, sh, cmake, output, or none) are not code to run here."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import runtime
from conftest import REPO, launches_execute

_FENCE = re.compile(r"^```(\S*)\s*$")
_MARK = re.compile(r"^<!--\s*snippet:\s*(\w+)(.*?)-->\s*$")
_C_LANGS = {"c": "c", "cpp": "c++", "c++": "c++"}


class Block:
    def __init__(self, path: Path, line: int, lang: str, text: str, mark: str) -> None:
        self.path, self.line, self.lang, self.text, self.mark = path, line, lang, text, mark

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


def _blocks(path: Path) -> list:
    lines = path.read_text().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        prev = lines[i - 1] if i else ""
        mark = _MARK.match(prev)
        out.append(Block(path, i + 1, m.group(1).lower(), "\n".join(lines[i + 1:j]) + "\n",
                         mark.group(1) if mark else ""))
        i = j + 1
    return out


DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
BLOCKS = [b for p in DOCS for b in _blocks(p)]


def test_every_code_block_is_run_or_says_why_not():
    """A python or C/C++ block without `int main` is marked main, kernel or skip (with a reason): none is left out
    silently."""
    unmarked = [b.where for b in BLOCKS if b.lang in _C_LANGS and not b.mark and "int main" not in b.text]
    assert not unmarked, f"C/C++ blocks that are neither whole programs nor marked: {unmarked}"
    for b in BLOCKS:
        if b.mark == "skip":
            assert re.search(r"\(\S.*\)", (b.path.read_text().split("\n")[b.line - 2])), f"{b.where}: skip without a reason"
        assert b.mark in ("", "main", "kernel", "skip"), f"{b.where}: unknown marker {b.mark!r}"


@pytest.mark.parametrize("path", [p for p in DOCS if any(b.lang == "python" and b.mark != "skip" for b in _blocks(p))],
                         ids=lambda p: p.name)
def test_python_blocks_run(path, tmp_path):
    if not launches_execute(0):
        pytest.skip("the snippets check what their kernels compute; the fake CUDA driver runs no kernel code")
    blocks = [b for b in _blocks(path) if b.lang == "python" and b.mark != "skip"]
    # One process, one namespace, the blocks in order, each from a file of its own (@runtime.jit reads its
    # kernels' source); a failure names its block.
    script = ["import sys, traceback", "ns = {'__name__': '__main__'}"]
    for b in blocks:
        f = tmp_path / f"{path.stem}_{b.line}.py"
        f.write_text(b.text)
        script.append(f"try:\n    exec(compile(open({str(f)!r}).read(), {str(f)!r}, 'exec'), ns)\n"
                      f"except BaseException:\n    traceback.print_exc()\n    sys.exit('snippet {b.where} failed')")
    (tmp_path / "snippets.py").write_text("\n".join(script) + "\n")
    env = dict(os.environ)
    env.pop("RUNTIME_JIT_INTERPRET", None)
    env["RUNTIME_CPU_DEVICES"] = "2"  # the collectives' examples use cpu:0 and cpu:1
    r = subprocess.run([sys.executable, str(tmp_path / "snippets.py")], capture_output=True, text=True, timeout=300,
                       env=env, cwd=tmp_path)
    assert r.returncode == 0, f"{path.name}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"


def _program(b: Block) -> str:
    if b.mark != "main":
        return b.text
    includes = [line for line in b.text.split("\n") if line.startswith("#include")]
    body = [line for line in b.text.split("\n") if not line.startswith("#include")]
    return "\n".join(includes) + "\nint main(void) {\n" + textwrap.indent("\n".join(body), "    ") + "\nreturn 0;\n}\n"


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang in _C_LANGS and b.mark != "skip"],
                         ids=lambda b: b.where)
def test_c_and_cpp_blocks_compile_and_run(block, tmp_path):
    if block.mark == "kernel":
        runtime.Module(block.text)  # compiles, or raises CompileError with the diagnostics
        return
    if not launches_execute(0):
        pytest.skip("the snippets check what their kernels compute; the fake CUDA driver runs no kernel code")
    lang = _C_LANGS[block.lang]
    compiler = shutil.which("cc" if lang == "c" else "c++")
    if compiler is None:
        pytest.skip(f"no {lang} compiler")
    src = tmp_path / ("snippet.c" if lang == "c" else "snippet.cpp")
    src.write_text(_program(block))
    pkg = Path(runtime.__file__).parent
    lib = pkg / "libruntime.so.0"
    exe = tmp_path / "snippet"
    std = "-std=c11" if lang == "c" else "-std=c++20"
    r = subprocess.run([compiler, std, "-I", str(REPO / "include"), str(src), str(lib), f"-Wl,-rpath,{pkg}",
                        "-o", str(exe)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{block.where} does not compile:\n{_program(block)}\n{r.stderr[-3000:]}"
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, f"{block.where} exited with {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"


def test_the_readme_kernel_launched_the_cuda_way_leaves_its_neighbour_unchanged():
    """The README's kernel over 1,030 elements launched as grid x block (1,280 items, no exact global size): the
    items past n store nothing, and memory allocated right after the output keeps its contents."""
    if not launches_execute(0):
        pytest.skip("checks what the kernel computes; the fake CUDA driver runs no kernel code")
    import numpy as np
    readme = (REPO / "README.md").read_text()
    source = re.search(r'from_source\(R"\((.*?)\)"\)', readme, re.S).group(1)
    twice = runtime.Module(source).get_function("twice")
    n = 1030
    inp = runtime.to_device(np.ones(n, np.float32))
    out = runtime.to_device(np.zeros(n, np.float32))
    neighbour = runtime.to_device(np.full(n, 5.0, np.float32))
    s = runtime.Stream()
    s.launch_kernel(twice, inp, out, np.uint32(n), global_size=1280, local_size=256)
    s.synchronize()
    assert (out.numpy() == 2).all()
    assert (neighbour.numpy() == 5).all()
