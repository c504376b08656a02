"""CLI fuzz cases shared by ``tests/fuzz`` and ``benchmarks/fuzz.py``: command lines with fuzzed
flags, job files, runs and lengths files, run in-process (typer's CliRunner) or through the real
entry point (``python -m trainplan``), and the checks each run must pass (see :mod:`cases`)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import strategies as st

from cases import (GPUS, PRESETS, audit_case, bad_numbers, data_case, jobfile_sections,
                   odd_or, strict_json, where, write_file)


NUM_TEXT = st.one_of(
    st.sampled_from(["8", "64", "1e22", "0.5", "1", "0", "-1", "1e308", "nan", "inf", "-inf", "x",
                     "1.2.3", "", "1e-308", "9" * 30, ":smile:", "[red]x[/red]"]),
    st.integers(-10, 10**6).map(str), st.floats(1e-3, 1e30).map(lambda f: f"{f:g}"))
FLAG_VALUES: dict[str, st.SearchStrategy] = {
    "--model": odd_or(st.sampled_from(PRESETS)).map(str), "--gpu": odd_or(st.sampled_from(GPUS)).map(str),
    "--precision": st.sampled_from(["bf16_mixed", "fp8_mixed", "fp32", "x"]),
    "--optimizer": st.sampled_from(["adamw", "sgd", "adafactor", "x"]),
    "--recompute": st.sampled_from(["none", "selective", "full", "layers", "x"]),
    "--framework": st.sampled_from(["megatron", "torchtitan", "fsdp", "deepspeed", "x"]),
    "--objective": st.sampled_from(["fastest", "cheapest", "fewest", "x"]),
    "--gpus": st.sampled_from(["8", "16", "8..32", "8,16", "0", "x", "4097", "1e3"]),
    "--law": st.sampled_from(["epoch2024", "hoffmann2022-a3", "kaplan2020", "x"]),
    "--emit": st.sampled_from(["deepspeed", "megatron", "torchtitan", "torchrun,slurm,k8s", "x", "deepspeed,torchtitan"]),
    "--fusion": st.sampled_from(["early", "late", "x"]),
    "--provider": st.sampled_from(["aws", "gcp", "azure", "x"]),
    "--failures": st.sampled_from(["llama3", "0", "1e-5", "x"]),
    "--name": st.text(max_size=12),
    "--attention-kernel": st.sampled_from(["fa2", "fa3", "cudnn", "x"]),
    "--fp8-recipe": st.sampled_from(["delayed", "current", "mxfp8", "x"]),
    "--fused-ops": st.sampled_from(["norm,rope", "linear_cross_entropy", "cross_entropy,x", ""]),
    "--lora-rank": st.sampled_from(["8", "64", "0", "-1", "70000", "x"]),
    "--frozen": st.sampled_from(["vision", "decoder", "projector", "vision,projector", "x", ""]),
}
COMMANDS: dict[tuple[str, ...], list[str]] = {
    ("estimate",): ["--model", "--gpu", "--gpus", "--tp", "--pp", "--zero", "--micro-batch",
                    "--recompute", "--seq-len", "--global-batch", "--tokens", "--precision",
                    "--optimizer", "--framework", "--fail-if-no-fit", "--emit",
                    "--attention-kernel", "--fp8-recipe", "--fused-ops", "--offload-activations",
                    "--lora", "--lora-rank", "--frozen"],
    ("plan",): ["--model", "--gpu", "--gpus", "--objective", "--deadline-days", "--budget-usd",
                "--headroom-gib", "--top", "--seq-len", "--global-batch", "--tokens", "--precision",
                "--emit", "--lora", "--lora-rank", "--frozen"],
    ("scale",): ["--flops", "--gpu-hours", "--dollars", "--deadline-days", "--gpu", "--gpus", "--mfu",
                 "--law", "--unique-tokens", "--epochs", "--inference-tokens", "--emit-model"],
    ("scale", "fit"): ["--bootstrap", "--budget-flops", "--ci", "--seed", "--drop-highest", "--name", "--out"],
    ("scale", "inference"): ["--inference-tokens", "--flops", "--target-loss", "--law", "--gpu-hours", "--gpu"],
    ("scale", "repeat"): ["--unique-tokens", "--flops", "--epochs"],
    ("scale", "batch"): ["--flops", "--seq-len", "--gpu-hours", "--gpu"],
    ("scale", "multimodal"): ["--flops", "--fusion", "--padding"],
    ("data", "lengths"): ["--max-len", "--batch-size", "--buckets", "--seed", "--skip-bad", "--model"],
    ("audit",): [],
    ("resilience",): ["--gpu", "--gpus", "--provider", "--interruptions", "--failures",
                      "--restart-minutes", "--simulate", "--emit", "--min-nodes"],
    ("models",): [], ("gpus",): [], ("frameworks",): [], ("schema",): [], ("conventions",): [],
}
BOOL_FLAGS = {"--fail-if-no-fit", "--skip-bad", "--lora"}
PATH_FLAGS = {"--out", "--emit-model"}
REQUIRED = {("scale", "inference"): ["--inference-tokens"], ("scale", "repeat"): ["--unique-tokens"]}


@st.composite
def cli_case(draw) -> tuple:
    """("cli", {argv, files}): a command line with fuzzed flags; ``files`` to write first."""
    cmd = draw(st.sampled_from(sorted(COMMANDS)))
    flags = COMMANDS[cmd]
    chosen = draw(st.lists(st.sampled_from(flags), max_size=5, unique=True)) if flags else []
    for req in REQUIRED.get(cmd, []):
        if req not in chosen and draw(st.integers(0, 9)) > 0:
            chosen.append(req)
    argv, files = list(cmd), {}
    if cmd in (("estimate",), ("plan",)) and draw(st.booleans()):
        fmt = draw(st.sampled_from(["toml", "yaml", "json"]))
        files[f"job.{fmt}"] = ("job", draw(jobfile_sections()), fmt)
        argv.append(f"job.{fmt}")
    elif cmd == ("scale", "fit"):
        rows = draw(st.lists(st.tuples(st.floats(1e6, 1e11), st.floats(1e8, 1e13), st.floats(1.5, 6)),
                             min_size=0, max_size=12))
        text = "N,D,loss\n" + "\n".join(f"{n:g},{d:g},{l:g}" for n, d, l in rows)
        if draw(st.integers(0, 5)) == 0:
            text += "\n" + draw(st.sampled_from(["x,y,z", "1e400,1,1", "nan,1,2", "-5,1,2", ",,"]))
        files["runs.csv"] = ("text", text, None)
        argv.append("runs.csv")
        if "--bootstrap" not in chosen:
            argv += ["--bootstrap", str(draw(st.integers(0, 30)))]
    elif cmd == ("data", "lengths"):
        kind, kw = draw(data_case())
        files["l" + kw["suffix"]] = ("text", kw["text"], None)
        argv.append("l" + kw["suffix"])
    elif cmd == ("audit",):
        files["claims.toml"] = ("claims", draw(audit_case())[1]["claims"], "toml")
        argv.append("claims.toml")
    for f in chosen:
        if f in BOOL_FLAGS:
            argv.append(f)
        elif f in PATH_FLAGS:
            argv += [f, draw(st.sampled_from(["out.json", "sub/out.toml", "law.json", "/dev/null", ".", "job.toml"]))]
        elif f == "--emit" and cmd == ("resilience",):
            argv += [f, draw(st.sampled_from(["launch", "."]))]
        else:
            argv += [f, draw(FLAG_VALUES.get(f, NUM_TEXT))]
    if "--emit" in chosen and cmd != ("resilience",):
        argv += ["--out", draw(st.sampled_from(["launch", "deep/launch", "."]))]
    if draw(st.integers(0, 3)) == 0:
        argv.append("--force")
    if draw(st.integers(0, 3)) > 0 and cmd not in (("conventions",), ("schema",)):
        argv.append("--json")
    return ("cli", dict(argv=argv, files=files))


def write_cli_files(folder: Path, files: dict) -> None:
    for name, (kind, data, fmt) in files.items():
        if kind == "text":
            (folder / name).write_text(data, encoding="utf-8", errors="surrogatepass")
        elif kind == "claims":
            write_file(folder, {"claims": data}, fmt, "claims")
        else:
            write_file(folder, data, fmt, Path(name).stem)


JSON_OK_EXIT = {0, 1}


def check_cli(argv: list[str], code: int | None, stdout: str, stderr: str,
              exc: BaseException | None = None) -> tuple[str, str]:
    """("ok" | "code" | "traceback" | "foreign" | "numbers", detail) of one CLI run."""
    if exc is not None and not isinstance(exc, SystemExit):
        return "foreign", f"{' '.join(argv[:2])}: {type(exc).__name__}: {str(exc)[:120]} at {where(exc)}"
    if "Traceback (most recent call last)" in stdout + stderr:
        return "traceback", f"{' '.join(argv[:2])}: {(stdout + stderr)[-300:]}"
    if code not in (0, 1, 2):
        return "code", f"{' '.join(argv[:2])}: exit {code}"
    if "--json" in argv and code in JSON_OK_EXIT and "--help" not in argv:
        try:
            data = strict_json(stdout)
        except ValueError as e:
            return "numbers", f"{' '.join(argv[:2])}: not strict JSON ({str(e)[:80]}): {stdout[:120]!r}"
        bad = bad_numbers(data)
        if bad:
            return "numbers", f"{' '.join(argv[:2])}: {', '.join(bad[:4])}"
    return "ok", ""


def run_cli_inprocess(case: tuple, folder: Path) -> tuple[str, str]:
    """Run a CLI case through typer's CliRunner inside ``folder``."""
    import os

    from typer.testing import CliRunner

    from trainplan.cli import app
    argv, files = case[1]["argv"], case[1]["files"]
    write_cli_files(folder, files)
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        r = CliRunner().invoke(app, argv)
    finally:
        os.chdir(cwd)
    return check_cli(argv, r.exit_code, r.stdout, r.stderr, r.exception)


def run_cli_subprocess(case: tuple, folder: Path,
                       timeout: float | None = 30.0) -> tuple[str, str]:
    """Run a CLI case as ``python -m trainplan`` in ``folder`` (the real entry point)."""
    import os
    import subprocess
    import sys
    argv, files = case[1]["argv"], case[1]["files"]
    write_cli_files(folder, files)
    from cli_hostile import src_path
    env = dict(os.environ, PYTHONPATH=src_path(), TRAINPLAN_NO_PROGRESS="1")
    try:
        p = subprocess.run([sys.executable, "-m", "trainplan", *argv], cwd=folder, env=env,
                           capture_output=True, text=True, timeout=timeout, errors="replace")
    except subprocess.TimeoutExpired:
        return "slow", f"{' '.join(argv)}: over {timeout:g} s"
    return check_cli(argv, p.returncode, p.stdout, p.stderr)
