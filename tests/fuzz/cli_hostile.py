"""Every command of the CLI, enumerated from the typer app (so that a new command or option is
covered), with fuzzed values for its options and hostile files for each of its path arguments.

* :func:`commands` walks the app: each command's path (``("diagnose", "trace")``), its
  parameters, which of them are paths (a ``Path`` annotation, or ``--model``, which takes a
  config.json) and which of those are read (inputs) or written (outputs).
* :func:`hostile_files` writes the files hostile to a reader: ``/dev/zero`` and a symlink to it,
  a FIFO with no writer, a gzip bomb (a few MB that inflate to 2 GiB, one JSON string), JSON
  nested 100,000 deep, a 200,000-character CSV field, a folder where a file is expected, a path
  component over 255 bytes, malformed job files (integer keys in YAML, deep nesting, huge
  strings, wrong types).
* :func:`hostile_matrix` is every (command, path argument, hostile file): run each with
  ``benchmarks/fuzz_child.run_limited`` (``python -m trainplan`` in a child with a time bound and an address-space
  limit, its peak RSS measured with ``wait4``).
* :func:`any_command_case` draws a command line of any command with fuzzed option values, for
  typer's CliRunner in-process (files safe to read in-process only).
"""

from __future__ import annotations

import gzip
import os
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

#: Path arguments that are written, not read.
OUTPUTS = {"--out", "--report", "--plot", "--emit"}
#: Options that take a path although typed str (a preset id or a config.json).
PATH_LIKE = {"--model"}
#: Peak RSS (KiB) above which a hostile-file run is counted as reading beyond the limits.
RSS_LIMIT_KIB = 1024 * 1024
#: Address space a child may map (bytes): a reader that ignores its limits fails here instead of
#: taking the machine's memory.
AS_LIMIT = 4 * 2**30


@dataclass
class Param:
    opt: str                # "--gpus", or the argument's name ("job_file")
    argument: bool
    required: bool
    hint: Any
    flag: bool
    multiple: bool

    @property
    def path(self) -> bool:
        return "Path" in str(self.hint) or self.opt in PATH_LIKE

    @property
    def output(self) -> bool:
        return self.opt in OUTPUTS


@dataclass
class Command:
    path: tuple[str, ...]
    params: list[Param] = field(default_factory=list)


#: commands that serve until interrupted (``trainplan ui``): a drawn valid case would never return;
#: their options are checked by their own tests (tests/unit/commands/test_ui.py)
SERVERS = {("ui",)}


def commands() -> list[Command]:
    """Every command (and group with options of its own, as ``scale``) of ``trainplan``, but
    the :data:`SERVERS`."""
    import typer
    from trainplan.cli import app
    root = typer.main.get_command(app)
    ctx_cls = type(root).context_class
    out: list[Command] = []

    def walk(cmd: Any, path: tuple[str, ...]) -> None:
        group = hasattr(cmd, "list_commands")
        if path in SERVERS:
            return
        if path and cmd.callback is not None and (not group or cmd.params):
            out.append(_command(cmd, path))         # a command, or a group with options (scale)
        if group:
            ctx = ctx_cls(cmd)
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), path + (name,))
    walk(root, ())
    return out


def _command(cmd: Any, path: tuple[str, ...]) -> Command:
    try:
        hints = typing.get_type_hints(cmd.callback)
    except Exception:  # noqa: BLE001 - a callback whose hints do not resolve: names only
        hints = {}
    c = Command(path)
    for p in cmd.params:
        argument = type(p).__name__.endswith("Argument")
        opt = p.name if argument else max(p.opts, key=len)
        flag = bool(getattr(p, "is_flag", False)) and not argument
        c.params.append(Param(opt, argument, bool(p.required), hints.get(p.name), flag,
                              bool(getattr(p, "multiple", False)) or p.nargs == -1))
    return c


# --------------------------------------------------------------------------- hostile files

def hostile_files(folder: Path, bomb_gib: float = 2.0) -> dict[str, str]:
    """{kind: path} of the files hostile to a reader, written into ``folder`` (once per run)."""
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, str] = {"dev-zero": "/dev/zero"}
    link = folder / "zero.json"
    if not link.exists():
        os.symlink("/dev/zero", link)
    out["symlink-to-dev-zero"] = str(link)
    fifo = folder / "fifo.json"
    if not fifo.exists():
        os.mkfifo(fifo)
    out["fifo"] = str(fifo)
    bomb = folder / "bomb.json.gz"
    if not bomb.exists():              # gzip members concatenate: one 16 MiB member, repeated
        member = gzip.compress(b"A" * (16 * 2**20), compresslevel=9)
        with open(bomb, "wb") as fh:
            fh.write(gzip.compress(b'{"traceEvents": [], "x": "'))
            for _ in range(int(bomb_gib * 64)):
                fh.write(member)
            fh.write(gzip.compress(b'"}'))
    out["gzip-bomb"] = str(bomb)
    plain_bomb = folder / "bomb.gz"               # the same bytes under another suffix
    if not plain_bomb.exists():
        os.link(bomb, plain_bomb)
    out["gzip-bomb-no-json-suffix"] = str(plain_bomb)
    texts = {
        "deep.json": "[" * 100_000 + "]" * 100_000,
        "deep.yaml": "a: " + "[" * 100_000 + "]" * 100_000 + "\n",
        "deep.toml": "a = " + "[" * 100_000 + "]" * 100_000 + "\n",
        "wide.csv": "N,D,loss\n" + "1" * 200_000 + ",1e9,2.5\n" * 2,
        "field.csv": "model,gpu,gpus,seq_len,global_batch,step_s\n" + "x" * 200_000 + ",h100,8,2048,64,1\n",
        "intkeys.yaml": "1: 2\nmodel: {preset: llama-3-8b, 3: 4}\njob: {7: 8}\n",
        "wrongtypes.toml": "model = 5\njob = 'x'\n[cluster]\ngpus = 'eight'\ngpu = [1]\n",
        "list.json": "[1, 2, 3]\n",
        "huge-string.yaml": "model: {preset: '" + "x" * 5_000_000 + "'}\n",
        "binary.json": "\x00\xff" * 1000,
        "nul.log": "iteration 1\x00/ 10 |" * 1000,
        "oom-badnumber.txt": "CUDA out of memory. Tried to allocate 7..9 GiB (GPU 0; 79.1 GiB total capacity)",
        "empty.json": "",
    }
    for name, text in texts.items():
        p = folder / name
        if not p.exists():
            p.write_text(text, encoding="utf-8", errors="surrogatepass")
        out[name] = str(p)
    d = folder / "folder.json"
    d.mkdir(exist_ok=True)
    out["folder"] = str(d)
    out["long-component"] = str(folder / ("x" * 300 + ".json"))
    out["missing"] = str(folder / "missing" / "no.json")
    return out


#: Plausible inputs for the arguments a command needs besides the one being fuzzed.
def sample_inputs(folder: Path) -> dict[str, str]:
    import api_cases
    files = {k: str(v) for k, v in api_cases.sample_files(folder).items()}
    claims = folder / "claims.toml"
    claims.write_text("[claims]\ngpu = 'h100'\ngpus = 8\nparams = 7e9\n")
    files["claims.toml"] = str(claims)
    job = folder / "job.toml"
    job.write_text("[model]\npreset = 'llama-3.2-1b'\n[job]\nseq_len = 2048\nglobal_batch = 64\n"
                   "tokens = 1e9\n[cluster]\ngpu = 'h100'\ngpus = 8\n")
    files["job.toml"] = str(job)
    return files


SAMPLE_FOR = {"job_file": "job.toml", "--job": "job.toml", "claims_file": "claims.toml",
              "schedule_file": "schedule.toml", "runs_csv": "runs.csv", "file": "lengths.jsonl",
              "artifact": "oom.txt", "paths": "trace.json", "path": "log.txt",
              "--profile": None, "--law-file": "law.json", "--calibration": None, "folder": "a_folder"}
#: calibrate's runs_csv is a different CSV from scale fit's.
SAMPLE_FOR_COMMAND = {("calibrate", "runs_csv"): "cal_runs.csv"}


def _sample(cmd: Command, p: Param, samples: dict[str, str]) -> str | None:
    name = SAMPLE_FOR_COMMAND.get((cmd.path[0], p.opt), SAMPLE_FOR.get(p.opt))
    return samples.get(name) if name else None


def hostile_matrix(cmds: list[Command], hostile: dict[str, str], samples: dict[str, str],
                   out_kinds: tuple[str, ...] = ("fifo", "dev-zero", "symlink-to-dev-zero", "folder",
                                                 "long-component", "missing")) -> list[tuple[str, list[str]]]:
    """(label, argv) for every command x path argument x hostile file (outputs get the kinds
    that make sense for a target); the command's other required arguments get samples."""
    runs = []
    for cmd in cmds:
        for p in cmd.params:
            if not p.path:
                continue
            kinds = out_kinds if p.output else tuple(hostile)
            for kind in kinds:
                argv = list(cmd.path)
                for q in cmd.params:
                    if q is p:
                        value = hostile[kind]
                    elif q.required:
                        value = _sample(cmd, q, samples) or "x"
                    else:
                        continue
                    argv += [value] if q.argument else [q.opt, value]
                if p.output:
                    argv.append("--force")
                runs.append((f"{' '.join(cmd.path)} {p.opt} <- {kind}", argv))
    return runs


def src_path() -> str:
    """PYTHONPATH for a child that must import the trainplan under test (this process's), not
    an installed one: an absolute path, since the child runs in another folder."""
    import trainplan
    here = str(Path(trainplan.__file__).resolve().parents[1])
    rest = os.environ.get("PYTHONPATH", "")
    return os.pathsep.join([here] + [os.path.abspath(p) for p in rest.split(os.pathsep) if p])


NUMBERS = st.sampled_from(["8", "1", "0", "-1", "0.5", "1e22", "1e308", "1e309", "-0.0", "nan", "inf",
                           "-inf", "x", "", "1.2.3", "9" * 400, "0x10", "1_000", " 8 "])
#: Files safe to read in-process, by what the argument expects and how it can go wrong.
SAFE_FILE_KINDS = ["sample", "sample", "sample", "empty.json", "bad.json", "deep.json", "nan.json",
                   "binary.bin", "list.json", "a_folder", "missing", "bad.toml", "wide.csv",
                   "intkeys.yaml", "wrongtypes.toml", "deep-1000.json"]


@st.composite
def any_command_case(draw, cmds: list[Command] | None = None) -> tuple:
    """("cli-any", {argv, path_values}): any command with a few of its options fuzzed."""
    import cli_cases
    cmds = cmds or commands()
    # the measure commands time real torch work on this machine (tens of seconds each): drawn a
    # tenth as often as the others
    weighted = [c for c in cmds for _ in range(1 if c.path[0] == "measure" else 10)]
    cmd = draw(st.sampled_from(weighted))
    argv = list(cmd.path)
    optional = [p for p in cmd.params if not p.required and p.opt not in ("--help",)]
    chosen = draw(st.lists(st.sampled_from(optional), max_size=5, unique_by=lambda p: p.opt)) if optional else []
    for p in [q for q in cmd.params if q.required] + chosen:
        if p.flag:
            argv.append(p.opt)
            continue
        if p.path:
            kind = draw(st.sampled_from(SAFE_FILE_KINDS))
            value = "@" + (f"sample:{p.opt}" if kind == "sample" else kind)
            if p.output:
                value = draw(st.sampled_from(["out/x.json", "r.md", "@a_folder", "@missing", "launch"]))
        else:
            hint = str(p.hint)
            if "int" in hint or "float" in hint:
                value = draw(NUMBERS)
            else:
                value = draw(cli_cases.FLAG_VALUES.get(p.opt, st.one_of(
                    st.sampled_from(["x", "", "llama-3-8b", "h100", "8", "a" * 5000, ":smile:[red]"]),
                    st.text(max_size=12))))
        argv += [value] if p.argument else [p.opt, value]
    if draw(st.integers(0, 2)) == 0 and any(p.opt == "--json" for p in cmd.params):
        argv.append("--json")
    return ("cli-any", {"argv": argv, "path": cmd.path})


def resolve_argv(cmd_path: tuple[str, ...], argv: list[str], folder: Path) -> list[str]:
    """Replace "@kind" values with files written into ``folder``."""
    import api_cases
    files = {k: str(v) for k, v in api_cases.sample_files(folder).items()}
    files.update(sample_inputs(folder))
    extra = {"intkeys.yaml": "1: 2\nmodel: {preset: llama-3-8b, 3: 4}\n",
             "wrongtypes.toml": "model = 5\njob = 'x'\n[cluster]\ngpus = 'eight'\n",
             "deep-1000.json": "[" * 1000 + "]" * 1000}
    for name, text in extra.items():
        (folder / name).write_text(text)
        files[name] = str(folder / name)
    cmd = Command(cmd_path)
    out = []
    for a in argv:
        if a.startswith("@sample:"):
            opt = a[len("@sample:"):]
            p = Param(opt, not opt.startswith("-"), True, None, False, False)
            a = _sample(cmd, p, files) or files["empty.json"]
        elif a.startswith("@") and a[1:] in files:
            a = files[a[1:]]
        out.append(a)
    return out


def run_any_inprocess(case: tuple, folder: Path) -> tuple[str, str]:
    """Run an :func:`any_command_case` through typer's CliRunner inside ``folder``."""
    import cli_cases
    from typer.testing import CliRunner

    from trainplan.cli import app
    argv = resolve_argv(tuple(case[1]["path"]), case[1]["argv"], folder)
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        r = CliRunner().invoke(app, argv)
    finally:
        os.chdir(cwd)
    shown = [a if len(a) < 80 else a[:40] + "..." for a in argv]
    return cli_cases.check_cli(shown, r.exit_code, r.stdout, r.stderr, r.exception)
