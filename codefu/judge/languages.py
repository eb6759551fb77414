"""Compile once per program: C++ with g++ (and a precompiled `bits/stdc++.h`), Python by syntax check.

Compilation runs inside the sandbox too: the source is hostile (`#include </dev/urandom>`, template
explosions, gigabyte arrays), so the compiler gets its own CPU, wall, memory and file-size limits.
Identical programs (common within a GRPO group) compile once: results are cached by a hash of the
source, the language, the compiler's identity and the flags (and, for checker programs, the extra files
placed beside the source, such as a problem's testlib.h).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import subprocess
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from codefu.judge.extract import Program
from codefu.judge.sandbox import Limits, Mount, Sandbox
from codefu.types import Language

log = logging.getLogger(__name__)

BOX = "/box"  # where a program's own directory appears inside the sandbox
PCH_DIR = "/pch"


@dataclass
class CompileConfig:
    cpp_compiler: str = "g++"
    cpp_flags: list[str] = field(default_factory=lambda: ["-std=c++17", "-O2"])
    precompiled_header: bool = True
    """Precompile bits/stdc++.h with the same flags (halves the compile time of most solutions)."""
    python: str = "/usr/bin/python3"
    """Interpreter for Python solutions (a system Python under /usr is visible in the sandbox)."""
    time_s: float = 10.0
    memory_bytes: int = 2 << 30
    output_bytes: int = 64 << 20
    """Largest file the compiler may write (object files, the binary, diagnostics)."""
    diagnostics_chars: int = 4000
    cache_entries: int = 512


@dataclass
class Compiled:
    """A runnable program (ok) or a compile error (message)."""

    language: Language
    ok: bool
    run_argv: list[str] = field(default_factory=list)
    mounts: list[Mount] = field(default_factory=list)
    message: str = ""  # truncated diagnostics
    directory: Path | None = None
    over_limit: bool = False  # the compiler ran out of time, memory or output (not a plain error)


class Compiler:
    """Thread-safe compile cache in front of the sandboxed compilers."""

    def __init__(self, config: CompileConfig, sandbox: Sandbox, work_dir: Path, pch_dir: Path):
        self.config = config
        self.sandbox = sandbox
        self.work_dir = work_dir  # this judge's own: compiled programs
        self.pch_dir = pch_dir  # shared by judges on the machine, kept across runs
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._pch_lock = threading.Lock()
        self._pch: Path | None | bool = False  # False: not built yet; None: unavailable
        self._identity = self._compiler_identity()
        self.hits = 0
        self.misses = 0

    @contextlib.contextmanager
    def compiled(
        self, program: Program, files: dict[str, str] | None = None, time_s: float | None = None
    ) -> Iterator[Compiled]:
        """The compiled program, kept on disk (not evicted from the cache) while the block runs.

        `files` (plain name -> text) are written beside the source before it compiles and stay beside
        the program when it runs (a checker's testlib.h); `time_s` overrides the compile time limit
        (not part of the cache key)."""
        files = files or {}
        key = self._key(program, files)
        with self._lock:
            entry = self._entries.get(key)
            owner = entry is None
            if owner:
                entry = self._entries[key] = _Entry()
                self.misses += 1
            else:
                self._entries.move_to_end(key)
                self.hits += 1
            entry.users += 1
            self._evict()
        try:
            if owner:
                try:
                    entry.result = self._build(program, key, files, time_s)
                finally:
                    entry.done.set()
            entry.done.wait()
            if entry.result is None:
                raise RuntimeError("compilation of this program failed in another thread")
            yield entry.result
        finally:
            with self._lock:
                entry.users -= 1
                # not cached: our own failures, and a compiler over its limit, which says more about the
                # load at the time and the caller's `time_s` (not in the key) than about the program
                if (entry.result is None or entry.result.over_limit) and self._entries.get(key) is entry:
                    del self._entries[key]
                    entry.evicted = True
                if entry.evicted:
                    entry.release_if_unused()

    # ---- building ---------------------------------------------------------------------------------

    def _build(self, program: Program, key: str, files: dict[str, str], time_s: float | None) -> Compiled:
        # a folder of its own per build, not per key: an entry dropped from the cache removes its folder
        # once its last user is done, which may be after the same program was built again
        directory = self.work_dir / "programs" / f"{key[:32]}-{uuid.uuid4().hex[:12]}"
        directory.mkdir(parents=True)
        if self.sandbox.is_root:  # the sandbox user writes its output here
            os.chown(directory, self.sandbox.config.uid, self.sandbox.config.uid)
        for name, content in files.items():  # names are checked by the caller: plain, not main.*
            if "/" in name or name in (".", ".."):
                raise ValueError(f"extra file name {name!r} is not a plain file name")
            (directory / name).write_bytes(content.encode("utf-8", errors="replace"))
        if program.language == "cpp":
            return self._build_cpp(program.source, directory, time_s)
        return self._build_python(program.source, directory, time_s)

    def _build_cpp(self, source: str, directory: Path, time_s: float | None = None) -> Compiled:
        (directory / "main.cpp").write_bytes(source.encode("utf-8", errors="replace"))
        mounts = [Mount(directory, BOX, writable=True)]
        argv = [self.config.cpp_compiler, *self.config.cpp_flags, "-fmax-errors=10", "-pipe"]
        pch = self._precompiled_header()
        if pch is not None:
            mounts.append(Mount(pch, PCH_DIR))
            argv += ["-I", PCH_DIR]
        argv += ["main.cpp", "-o", "main"]
        ok, message, over = self._run_compiler(argv, mounts, directory, time_s)
        if ok and not (directory / "main").exists():
            ok, message = False, message or "the compiler produced no executable"
        return Compiled("cpp", ok, [f"{BOX}/main"], [Mount(directory, BOX)], message, directory, over)

    def _build_python(self, source: str, directory: Path, time_s: float | None = None) -> Compiled:
        (directory / "main.py").write_bytes(source.encode("utf-8", errors="replace"))
        check = "import sys; compile(open(sys.argv[1], 'rb').read(), 'main.py', 'exec')"
        mounts = [Mount(directory, BOX)]
        ok, message, over = self._run_compiler(
            [self.config.python, "-c", check, f"{BOX}/main.py"], mounts, directory, time_s
        )
        run = [self.config.python, "-B", f"{BOX}/main.py"]
        return Compiled("python", ok, run, mounts, message, directory, over)

    def _run_compiler(
        self, argv: list[str], mounts: list[Mount], directory: Path, time_s: float | None = None
    ) -> tuple[bool, str, bool]:
        """(compiled, diagnostics, over a limit)"""
        cfg = self.config
        cpu = cfg.time_s if time_s is None else time_s
        limits = Limits(cpu, cpu * 1.5, cfg.memory_bytes, cfg.output_bytes)
        out, err = directory / "compile.out", directory / "compile.err"
        result = self.sandbox.run(argv, limits, mounts, out, err, cwd=BOX)
        text = read_head(out, cfg.diagnostics_chars) + read_head(err, cfg.diagnostics_chars)
        out.unlink(missing_ok=True)
        err.unlink(missing_ok=True)
        if result.limit is not None:
            reason = {"cpu": "time", "wall": "wall-clock time", "memory": "memory", "output": "output size"}
            message = f"compilation exceeded its {reason[result.limit]} limit\n{text}"
            return False, message[: cfg.diagnostics_chars], True
        if result.exit_code != 0:
            message = text or f"compiler exited with status {result.exit_code}"
            return False, message[: cfg.diagnostics_chars], False
        return True, text[: cfg.diagnostics_chars], False

    def _precompiled_header(self) -> Path | None:
        """Build bits/stdc++.h.gch once per flags (trusted input, so outside the sandbox)."""
        if not self.config.precompiled_header:
            return None
        with self._pch_lock:
            if self._pch is not False:
                return self._pch  # type: ignore[return-value]
            flags = [*self.config.cpp_flags, "-pipe"]
            digest = hashlib.sha256("\0".join([self._identity, *flags]).encode()).hexdigest()[:16]
            root = self.pch_dir / digest
            gch = root / "bits" / "stdc++.h.gch"
            self._pch = root if gch.exists() else None
            if self._pch is None:
                try:
                    header = self._find_header("bits/stdc++.h", flags)
                    gch.parent.mkdir(parents=True, exist_ok=True)
                    tmp = gch.with_name(f"stdc++.h.gch.{os.getpid()}")
                    subprocess.run(
                        [self.config.cpp_compiler, *flags, "-x", "c++-header", header, "-o", str(tmp)],
                        check=True,
                        capture_output=True,
                        timeout=300,
                    )
                    tmp.chmod(0o644)
                    tmp.rename(gch)
                    self._pch = root
                except (OSError, subprocess.SubprocessError) as e:
                    log.warning("no precompiled header (compiles will be slower): %s", e)
            return self._pch

    def _find_header(self, name: str, flags: list[str]) -> str:
        """The path the compiler resolves `#include <name>` to (from its -H trace)."""
        r = subprocess.run(
            [self.config.cpp_compiler, *flags, "-H", "-E", "-x", "c++", "-", "-o", os.devnull],
            input=f"#include <{name}>\n".encode(),
            capture_output=True,
            timeout=120,
        )
        for line in r.stderr.decode(errors="replace").splitlines():
            if line.startswith(". ") and line.endswith(name):
                return line[2:]
        raise OSError(f"{self.config.cpp_compiler} does not find <{name}>")

    # ---- cache ------------------------------------------------------------------------------------

    def _compiler_identity(self) -> str:
        try:
            path = shutil.which(self.config.cpp_compiler) or self.config.cpp_compiler
            version = subprocess.run([path, "--version"], capture_output=True, timeout=30).stdout
            return f"{os.path.realpath(path)}\0{version.decode(errors='replace')}"
        except (OSError, subprocess.SubprocessError):
            return self.config.cpp_compiler

    def _key(self, program: Program, files: dict[str, str] | None = None) -> str:
        h = hashlib.sha256()
        parts = [program.language, self._identity, *self.config.cpp_flags, self.config.python, program.source]
        for name in sorted(files or {}):  # length-prefixed: no two file sets hash alike by concatenation
            parts += [f"file {len(name)} {len(files[name])}", name, files[name]]
        for part in parts:
            h.update(part.encode("utf-8", errors="replace") + b"\0")
        return h.hexdigest()[:32]

    def _evict(self) -> None:
        while len(self._entries) > self.config.cache_entries:
            _, old = self._entries.popitem(last=False)
            old.evicted = True
            old.release_if_unused()


class _Entry:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: Compiled | None = None
        self.users = 0
        self.evicted = False

    def release_if_unused(self) -> None:
        if self.users == 0 and self.result is not None and self.result.directory is not None:
            shutil.rmtree(self.result.directory, ignore_errors=True)


def read_head(path: Path, chars: int) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(chars * 4).decode("utf-8", errors="replace")[:chars]
    except FileNotFoundError:
        return ""
