"""Close the loop: generate ledger sessions, fine-tune the embedded model on them, and evaluate base against tuned.

Run: ``.venv/bin/python bench/close_the_loop.py [--out DIR] [--train-sessions N] [--device auto]`` (about 85
minutes on 2 cores with the defaults: 29 training, 48 evaluating; every step is skipped when its output exists, so a
killed run continues where it stopped). It writes ``DIR/report.md`` (quoted in the README) and prints it.

1. **Data.** ``toolwild suite ledger --seed 1001`` makes the training sessions (the built-in suite uses seed 0), and
   the eval suites are made or read: (a) held-out sessions of the built-in ledger (seed 0); (b) an own-books suite on
   a ledger training never saw (``bean-example --seed 23``); (c) the published WildToolBench fixture sessions (other
   domains); (d) is (a) run under ``--perturb rename,distractors:3``.
2. **Training.** ``toolwild train`` with every eval suite named ``--held-out`` (a shared session would be refused).
3. **The base, stored as the tuned model is.** The tuned GGUF keeps its LoRA-tuned tensors in q8_0; the embedded
   file holds them in q4_1. So the base is written back with the same tensors re-stored in q8_0, untrained: base
   versus tuned then differs in the weights alone.
4. **Evaluation.** ``toolwild eval`` per set and model, free-running, base and tuned side by side (one llama.cpp
   thread each); sets (a)-(c) run forked, which adds the self-conditioning gap (forced minus free accuracy: how much
   worse the model does on its own history than on the gold one) to the free figures.
5. **Report.** Per set: task and session accuracy of base and tuned with the paired 95% bootstrap interval of the
   difference (``toolwild compare``), function-name errors (calls naming a tool the session does not have, and
   WildToolBench's "Wrong Name / Missing Info" class), and the gap where measured.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT.parent / "shared" / "fixtures" / "wildtoolbench" / "sessions_0_4.reconstructed.jsonl"
BIN = Path(sys.executable).parent
TOOLWILD = str(BIN / "toolwild")

SETS = {
    "a": ("held-out built-in ledger (16 sessions)", ["--history", "forked"]),
    "b": ("own books, unseen ledger (bean-example --seed 23, 8 sessions)", ["--history", "forked"]),
    "c": ("published WildToolBench fixture (5 sessions, other domains)", ["--history", "forked"]),
    "d": ("(a) under --perturb rename,distractors:3", ["--perturb", "rename,distractors:3"]),
}
"""Each set's suite options: forked runs give the free-running figures (fork 0) and the self-conditioning gap; the
perturbed set runs free only (its cost would double for a gap that (a) already measures unperturbed)."""


def sh(args: list[str], log: Path, *, env: dict[str, str] | None = None, ok: tuple[int, ...] = (0,)) -> float:
    """Run a command, its output to ``log``; returns its wall time. Exit codes outside ``ok`` stop the experiment."""
    started = time.perf_counter()
    with log.open("w") as out:
        code = subprocess.run(args, stdout=out, stderr=subprocess.STDOUT, env=env, check=False).returncode
    if code not in ok:
        sys.exit(f"{' '.join(args)} exited {code}; see {log}")
    return time.perf_counter() - started


def step(name: str, done: bool, times: dict[str, float], run) -> None:
    if done:
        print(f"[skip] {name} (already done)", flush=True)
        return
    print(f"[run ] {name}", flush=True)
    times[name] = round(run(), 1)
    print(f"[done] {name} in {times[name]:.0f} s", flush=True)


def make_data(out: Path, n_train: int, times: dict[str, float]) -> dict[str, Path]:
    data = out / "data"
    data.mkdir(parents=True, exist_ok=True)
    suites = {"train": data / "train.jsonl", "a": data / "a_ledger.jsonl", "b": data / "b_own_books.jsonl"}
    suites["c"] = FIXTURE
    train_cmd = [TOOLWILD, "suite", "ledger", "--sessions", str(n_train), "--seed", "1001", "--verify"]
    step(
        "data: training sessions",
        suites["train"].is_file(),
        times,
        lambda: sh([*train_cmd, "--out", str(suites["train"])], data / "train.log"),
    )
    a_cmd = [TOOLWILD, "suite", "ledger", "--sessions", "16", "--seed", "0", "--out", str(suites["a"])]
    step("data: (a) built-in ledger", suites["a"].is_file(), times, lambda: sh(a_cmd, data / "a.log"))
    books = data / "books.beancount"

    def own_books() -> float:
        example = [str(BIN / "bean-example"), "--seed", "23"]
        books.write_text(subprocess.run(example, capture_output=True, text=True, check=True).stdout)
        cmd = [TOOLWILD, "suite", "ledger", "--ledger", str(books), "--sessions", "8", "--seed", "5"]
        return sh([*cmd, "--out", str(suites["b"])], data / "b.log")

    step("data: (b) own books", suites["b"].is_file(), times, own_books)
    return suites


def train(out: Path, suites: dict[str, Path], args: argparse.Namespace, times: dict[str, float]) -> Path:
    tuned = out / "tuned"
    cmd = [TOOLWILD, "train", str(suites["train"]), "--out", str(tuned), "--device", args.device]
    for key in ("a", "b", "c"):
        cmd += ["--held-out", str(suites[key])]
    cmd += ["--epochs", str(args.epochs), "--lr", str(args.lr), "--batch", "4", "--lora-rank", "16"]
    resume = ["--resume"] if (tuned / "train_config.json").exists() else []
    step("training", (tuned / "train_report.json").is_file(), times, lambda: sh(cmd + resume, out / "train.log"))
    return tuned


def base_control(out: Path, times: dict[str, float]) -> Path:
    path = out / "base_q8_0.gguf"

    def write() -> float:
        started = time.perf_counter()
        from toolwild.llm.backends.local import default_model_path
        from toolwild.train.finetune import LORA_TARGETS
        from toolwild.train.gguf_model import WeightType, load_base, write_tuned_gguf

        base = load_base(default_model_path())
        state = base.model.state_dict()
        targets = [n for n in state if any(f".{t}." in n for t in LORA_TARGETS)]
        write_tuned_gguf(default_model_path(), state, path, weight_type=WeightType.Q8_0, always=targets)
        return time.perf_counter() - started

    step("base re-stored in q8_0", path.is_file(), times, write)
    return path


def evaluate(out: Path, suites: dict[str, Path], models: dict[str, Path], times: dict[str, float]) -> None:
    runs = out / "runs"
    runs.mkdir(exist_ok=True)
    env = {**os.environ, "TOOLWILD_LOCAL_THREADS": "1"}

    def one(key: str, label: str) -> float:
        extra = SETS[key][1]
        suite = suites["a"] if key == "d" else suites[key]
        cmd = [TOOLWILD, "eval", "--suite", str(suite), "--model", f"local:{models[label]}", "--runs-dir", str(runs)]
        cmd += ["--name", f"{key}-{label}", "--no-preflight", "--concurrency", "1", *extra]
        return sh(cmd, runs / f"{key}-{label}.log", env=env, ok=(0, 1))

    for key in SETS:
        done = all((runs / f"{key}-{label}" / "metrics.json").is_file() for label in models)

        def pair(key: str = key) -> float:
            started = time.perf_counter()
            with ThreadPoolExecutor(max_workers=2) as pool:
                list(pool.map(one, [key] * len(models), list(models)))
            return time.perf_counter() - started

        step(f"eval ({key}) {SETS[key][0]}", done, times, pair)


def unknown_tool_calls(run: Path) -> tuple[int, int]:
    """(calls naming a tool the session does not have, all calls) over a run's trajectories."""
    from toolwild.core.formats.wtb import load_wtb_suite

    kept = run / "suite.jsonl"  # a run keeps its suite when it ran a copy (--perturb), else names it
    suite, _ = load_wtb_suite(kept if kept.is_file() else json.loads((run / "config.json").read_text())["suite"])
    tools = {s.id: {t.name for t in s.tools} for s in suite.sessions}
    bad = total = 0
    for line in (run / "trajectories.jsonl").read_text().splitlines():
        record = json.loads(line)
        for task in record["tasks"]:
            for s in task["steps"]:
                for call in s.get("tool_calls") or []:
                    total += 1
                    bad += call["name"] not in tools.get(record["session_id"], set())
    return bad, total


def mean_loss(losses: list[list[float]]) -> float:
    return sum(loss for _, loss in losses) / len(losses)


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def report(out: Path, models: dict[str, Path], times: dict[str, float]) -> str:
    from toolwild.eval.compare import compare_runs

    runs = out / "runs"
    lines = [
        "| set | model | task acc. | session acc. | tasks whose ledger is as expected | function-name errors: "
        "unknown tool / WTB class | gap (forced - free) |",
        "|---|---|---|---|---|---|---|",
    ]
    diffs = []
    for key, (label, _) in SETS.items():
        for name in models:
            run = runs / f"{key}-{name}"
            metrics = json.loads((run / "metrics.json").read_text())
            total = metrics["total_info"]
            bad, calls = unknown_tool_calls(run)
            wtb_class = metrics["extensions"]["error_taxonomy"]["Wrong Name / Missing Info"]["count"]
            forked = metrics["extensions"].get("forked")
            gap = "-"
            if forked:
                g = forked["overall"]
                gap = f"{100 * g['gap']:+.1f} pt" if g.get("gap") is not None else "n/a"
                if g.get("low") is not None:
                    gap += f" [{100 * g['low']:+.1f}, {100 * g['high']:+.1f}]"
            task, session = total["task"], total["session"]
            state = metrics["extensions"].get("state_info", {}).get("task_state")
            state_text = f"{state['correct_count']}/{state['total_count']}" if state else "- (no state checks)"
            lines.append(
                f"| ({key}) {label} | {name} | {pct(task['accuracy'])} ({task['correct_count']}/{task['total_count']}) "
                f"| {pct(session['accuracy'])} ({session['correct_count']}/{session['total_count']}) "
                f"| {state_text} | {bad}/{calls} calls / {wtb_class} tasks | {gap} |"
            )
        comparison = compare_runs([runs / f"{key}-{name}" for name in models])
        for p in comparison.pairs:
            diffs.append(
                f"| ({key}) | {p.metric} | {100 * p.point:+.1f} pt | [{100 * p.low:+.1f}, {100 * p.high:+.1f}] "
                f"| {'yes' if p.excludes_zero else 'no'} | {p.sessions} |"
            )
    train_report = json.loads((out / "tuned" / "train_report.json").read_text())
    config = json.loads((out / "tuned" / "train_config.json").read_text())
    text = [
        "## Close the loop: base vs tuned SmolLM2-135M-Instruct",
        "",
        f"Training: {train_report['sessions']} ledger sessions (seed 1001), {train_report['tokens']:,} tokens "
        f"({train_report['trained_tokens']:,} with loss), {train_report['steps']} steps of {config['batch_size']} "
        f"sessions, LoRA rank {config['lora_rank']} on every linear layer, lr {config['learning_rate']}, "
        f"{train_report['epochs']:.2f} epochs; training loss {mean_loss(train_report['losses'][:4]):.3f} (mean of the "
        f"first 4 steps) -> {mean_loss(train_report['losses'][-4:]):.3f} (last 4); "
        f"{train_report['train_seconds'] / 60:.1f} min on "
        f"{train_report['device']} ({train_report['threads']} threads), {train_report['tokens_per_second']:.0f} "
        "tokens/s.",
        "",
        *lines,
        "",
        "Paired difference, tuned - base (95% bootstrap interval over sessions):",
        "",
        "| set | metric | difference | interval | excludes 0 | sessions |",
        "|---|---|---|---|---|---|",
        *diffs,
        "",
        "Step times (s; the evaluations ran base and tuned side by side, with the test suite running beside them): "
        + ", ".join(f"{k} {v:.0f}" for k, v in times.items()),
        "",
    ]
    return "\n".join(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "close_the_loop")
    parser.add_argument("--train-sessions", type=int, default=96)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    if not FIXTURE.is_file():
        sys.exit(f"the WildToolBench fixture is missing: {FIXTURE}")
    args.out.mkdir(parents=True, exist_ok=True)
    times_file = args.out / "times.json"
    times: dict[str, float] = json.loads(times_file.read_text()) if times_file.is_file() else {}
    try:
        suites = make_data(args.out, args.train_sessions, times)
        tuned = train(args.out, suites, args, times)
        models = {"base": base_control(args.out, times), "tuned": tuned / "model.gguf"}
        evaluate(args.out, suites, models, times)
    finally:
        times_file.write_text(json.dumps(times, indent=2) + "\n")
    text = report(args.out, models, times)
    (args.out / "report.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
