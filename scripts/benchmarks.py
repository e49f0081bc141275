#!/usr/bin/env python3
"""Writes BENCHMARKS.md (and the short table in README.md) from criterion's output.

Usage, from the repository root, after running benchmarks:

    cargo bench --bench small_tensors --bench sparse -- --warm-up-time 1 --measurement-time 2
    python3 scripts/benchmarks.py

Reads every `target/criterion/<group>/<function>/new/{benchmark,estimates}.json`
(criterion 0.5's layout), finds which `benches/<name>.rs` declares each group,
and writes one table per bench: each rlx measurement next to the hand-written
implementation of the same computation in the same group, and their ratio.
Only the standard library is used.

Pairing rule: a function id naming the hand-written side contains one of
HAND_WORDS. Each other id in the group is an rlx measurement; its partner is
`"<its id> by hand"` if present, else the hand-written id sharing most words
with it; with a single hand-written id in the group, every rlx id is
compared with it; else a last unmatched rlx id and hand-written id pair up. Results older than
STALE_HOURS before the newest one are left out (they are from an earlier run)
and listed at the end of BENCHMARKS.md.

The README's table lists the rows of README_ROWS (with their short labels), between the markers
`<!-- benchmarks:start -->` and `<!-- benchmarks:end -->`.
"""

import datetime
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRITERION = os.path.join(os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target"), "criterion")
BENCHES = os.path.join(ROOT, "benches")
HAND_WORDS = ("hand", "analytic", "matrixmultiply")
STALE_HOURS = 24.0
START, END = "<!-- benchmarks:start -->", "<!-- benchmarks:end -->"

# What each group measures, in a user's words (groups not listed keep their id).
WORKLOADS = {
    "lj_tensor": "Lennard-Jones energy of 3 particles over one `[6]` tensor, warm `value_and_grad_`",
    "rosenbrock": "extended Rosenbrock, `x: [10]`, warm `hessian_`",
    "van_der_pol": "one implicit-Euler Newton iteration on Van der Pol (`[2]` state)",
    "eager_ops": "eager ops on 2-element tensors",
    "pair_loop": "all-pairs LJ of 64 particles as a double loop, warm `grad_`",
    "pair_loop_first_call": "first `grad_` of that pair loop (trace, differentiate, compile, run)",
    "ladder_200": "200-node diode ladder, `sparse_jacobian_into_`",
    "stencil_100x100": "`Δu − u³` on a 100 × 100 grid, `sparse_jacobian_into_`",
    "arrow_2000": "2000 × 2000 arrow Jacobian (bicolouring), `sparse_jacobian_into_`",
    "newton_20164": "Newton step on the 20 164-node diode grid (residual, sparse Jacobian, LU, solve)",
    "first_call_20000": "first `sparse_jacobian_` at 20 164 unknowns",
    "dc_sensitivities_196": "DC power's gradient through `rlx::root`, 196-node grid",
    "dc_sensitivities_2025": "DC power's gradient through `rlx::root`, 2025-node grid",
    "dc_sensitivities_20164": "DC power's gradient through `rlx::root`, 20 164-node grid",
    "newton_196": "Newton step on the 196-node diode grid",
    "newton_2025": "Newton step on the 2025-node diode grid",
    "lu_196": "`SparseLu` factor + solve, 196 unknowns",
    "lu_2025": "`SparseLu` factor + solve, 2025 unknowns",
    "lu_20164": "`SparseLu` factor + solve, 20 164 unknowns",
    "msa_30": "minimal-surface Hessian (element assembly), 900 unknowns, `sparse_hessian_into_`",
    "msa_100": "minimal-surface Hessian (element assembly), 10 000 unknowns, `sparse_hessian_into_`",
    "msa_300": "minimal-surface Hessian (element assembly), 90 000 unknowns, `sparse_hessian_into_`",
    "macro_lj": "Lennard-Jones energy over six `f64` parameters, warm `grad_`",
    "mlp_784_256_256_10_b64": "MLP 784-256-256-10, batch 64, `f32`, `value_and_grad_`",
    "jacobian_20": "dense `jacobian_` of a tridiagonal residual, n = 20",
    "jacobian_200": "dense `jacobian_` of a tridiagonal residual, n = 200",
    "jacobian_2000": "dense `jacobian_` of a tridiagonal residual, n = 2000",
    "hessian_rosenbrock_10": "dense `hessian_` of extended Rosenbrock, n = 10",
    "hessian_rosenbrock_100": "dense `hessian_` of extended Rosenbrock, n = 100",
    "hessian_rosenbrock_1000": "dense `hessian_` of extended Rosenbrock, n = 1000",
    "pendula_64x200": "64 pendula × 200 steps (`rlx::iterate`), `value_and_grad_`",
    "steps_1e5": "10⁵ time steps, `value_and_grad_`",
    "rosenbrock_hvp_1000": "extended Rosenbrock, n = 1000, `hvp_`",
    "diode_batch_jacobian_10000": "`batch_jacobian_` of a 3-terminal device model, 10 000 devices",
    "lj_broadcast_64": "all-pairs LJ of 64 particles, broadcast form, `value_and_grad_`",
    "slices_grad_1000": "`grad_` through 1000 row slices of a `[1000, 64]` tensor",
    "chain8_1M_f32": "8 cheap element-wise ops fused, 1M `f32`",
    "chain9_transcendental_1M_f32": "9-op chain with `tanh`/`exp`/`sqrt`, 1M `f32`",
    "scalar50_f64": "50 dependent 0-d `f64` ops",
}

# The README's short table: (group, rlx function id), one row per workload.
README_ROWS = [
    ("lj_tensor", None, "LJ energy + forces, 3 particles, `value_and_grad_`"),
    ("rosenbrock", None, "Rosenbrock n = 10, `hessian_`"),
    ("pair_loop", None, "64-particle pair loop, `grad_`"),
    ("ladder_200", None, "200-node ladder, sparse Jacobian"),
    ("stencil_100x100", None, "100 × 100 stencil, sparse Jacobian"),
    ("arrow_2000", None, "2000 × 2000 arrow, sparse Jacobian"),
    ("newton_20164", None, "Newton step, 20 164 unknowns"),
    ("mlp_784_256_256_10_b64", "rlx value_and_grad", "MLP 784-256-256-10, `value_and_grad_`"),
    ("pendula_64x200", "rlx::iterate value_and_grad_", "64 pendula × 200 steps, gradient"),
    ("rosenbrock_hvp_1000", None, "Rosenbrock n = 1000, `hvp_`"),
    ("diode_batch_jacobian_10000", None, "10 000 devices, `batch_jacobian_`"),
]


def load_results():
    """Every `new` measurement: (group, function, nanoseconds, mtime)."""
    out = []
    for dirpath, _dirs, files in os.walk(CRITERION):
        if os.path.basename(dirpath) != "new" or "estimates.json" not in files:
            continue
        with open(os.path.join(dirpath, "benchmark.json")) as f:
            bench = json.load(f)
        est_path = os.path.join(dirpath, "estimates.json")
        with open(est_path) as f:
            est = json.load(f)
        # criterion's headline estimate: the slope of a linear sampling
        # when it has one, else the mean.
        typical = est.get("slope") or est["mean"]
        out.append(
            {
                "group": bench["group_id"],
                "function": bench.get("function_id") or "",
                "value": bench.get("value_str"),
                "ns": typical["point_estimate"],
                "mtime": os.path.getmtime(est_path),
            }
        )
    return out


def group_sources():
    """The group-id patterns of each bench, and each bench's text."""
    patterns, texts = [], []
    for name in sorted(os.listdir(BENCHES)):
        if not name.endswith(".rs"):
            continue
        with open(os.path.join(BENCHES, name)) as f:
            text = f.read()
        for m in re.finditer(r'benchmark_group\(\s*(?:format!\()?\s*"([^"]*)"', text):
            literal = m.group(1)
            regex = "^" + re.sub(r"\\\{[^}]*\\\}", ".*", re.escape(literal)) + "$"
            patterns.append((re.compile(regex), name[:-3]))
        texts.append((name[:-3], text))
    # Groups named through a variable holding a `format!` (a helper taking
    # the group's name): each `format!("name_{n}")` whose literal part
    # starts with a word, after the `benchmark_group` patterns.
    for bench, text in texts:
        for m in re.finditer(r'format!\(\s*"([A-Za-z][A-Za-z0-9_]{2,}\{[^"]*)"', text):
            regex = "^" + re.sub(r"\\\{[^}]*\\\}", ".*", re.escape(m.group(1))) + "$"
            patterns.append((re.compile(regex), bench))
    return patterns, texts


def bench_of(group, sources):
    """The bench declaring `group`: by its `benchmark_group("..")` literal
    (or `format!` pattern), else by the group id written as a string literal
    anywhere in a bench (a group named through a variable)."""
    patterns, texts = sources
    for regex, bench in patterns:
        if regex.match(group):
            return bench
    for bench, text in texts:
        if f'"{group}"' in text:
            return bench
    return None


def is_hand(function):
    f = function.lower()
    return any(w in f for w in HAND_WORDS)


def words(s):
    """The words of an id that can match across sides (no digits, no side names)."""
    skip = ("rlx", "hand", "written", "by")
    return {w for w in re.split(r"[^a-z_]+", s.lower().replace("_", " ")) if w and w not in skip}


def pair(rows):
    """[(rlx row, hand row or None)] for one group, in id order."""
    hands = [r for r in rows if is_hand(r["function"])]
    rlxs = [r for r in rows if not is_hand(r["function"])]
    partner = {}
    for r in rlxs:
        exact = [h for h in hands if h["function"] == r["function"] + " by hand"]
        if exact:
            partner[id(r)] = exact[0]
            continue
        shared = [(len(words(h["function"]) & words(r["function"])), i) for i, h in enumerate(hands)]
        best = max(shared, default=(0, None))
        if best[0] > 0:
            partner[id(r)] = hands[best[1]]
    if len(hands) == 1:
        # One hand-written baseline: every rlx variant is compared with it.
        for r in rlxs:
            partner.setdefault(id(r), hands[0])
    else:
        claimed = {id(h) for h in partner.values()}
        lone_r = [r for r in rlxs if id(r) not in partner]
        lone_h = [h for h in hands if id(h) not in claimed]
        if len(lone_r) == 1 and len(lone_h) == 1:
            partner[id(lone_r[0])] = lone_h[0]
    return [(r, partner.get(id(r))) for r in rlxs]


def fmt_time(ns):
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


def fmt_ratio(a, b):
    return f"{a / b:.2f}x" if b else ""


def machine():
    model, cores, flags = "unknown CPU", 0, set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, val = line.partition(":")
                key, val = key.strip(), val.strip()
                if key == "model name":
                    model = val
                    cores += 1
                elif key == "flags" and not flags:
                    flags = set(val.split())
    except OSError:
        pass
    simd = ", ".join(x for x in ("avx2", "avx512f") if x in flags) or "no AVX2"
    try:
        rustc = subprocess.run(
            ["rustc", "--version"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        rustc = "rustc (version unknown)"
    return f"{model}, {cores} logical cores ({simd}); {rustc}"


def label(row):
    f = row["function"]
    return f + (f" / {row['value']}" if row.get("value") else "")


def main():
    results = load_results()
    if not results:
        sys.exit(f"no criterion results under {CRITERION}: run `cargo bench` first")
    newest = max(r["mtime"] for r in results)
    fresh = [r for r in results if newest - r["mtime"] <= STALE_HOURS * 3600]
    stale = sorted({r["group"] for r in results} - {r["group"] for r in fresh})
    patterns = group_sources()

    by_bench = {}
    for r in fresh:
        bench = bench_of(r["group"], patterns) or "unknown"
        by_bench.setdefault(bench, {}).setdefault(r["group"], []).append(r)
    benches_run = sorted(by_bench)

    date = datetime.datetime.fromtimestamp(newest, datetime.timezone.utc)
    out = [
        "# Benchmarks",
        "",
        "<!-- Generated by scripts/benchmarks.py from criterion's output; do not edit by hand. -->",
        "",
        f"Measured {date:%Y-%m-%d} on {machine()}. The machine is shared by several",
        "sessions, so absolute times move with its load: compare the ratios, which are",
        "taken between rlx and the hand-written code of the same group in the same run.",
        "A ratio below 1 means rlx is faster. The command below runs rlx on one thread",
        "(`RLX_NUM_THREADS=1`), as the hand-written code; rows named for threads say so.",
        "",
        "Every group times rlx and a hand-written implementation of the same computation",
        "(values checked equal before timing; see each bench's module doc). Times are",
        "criterion's estimate per iteration (the slope of its linear sampling, or the mean).",
        "",
        "Regenerate with:",
        "",
        "```sh",
        "RLX_NUM_THREADS=1 cargo bench " + " ".join(f"--bench {b}" for b in benches_run if b != "unknown")
        + " -- --warm-up-time 1 --measurement-time 2",
        "python3 scripts/benchmarks.py",
        "```",
        "",
        "`cargo bench --bench <name> -- <group>` runs one group; longer",
        "`--measurement-time` gives steadier numbers.",
        "",
    ]
    table_rows = {}
    for bench in benches_run:
        out += [f"## `{bench}`", "", "| workload | rlx | time | hand-written | time | ratio |",
                "| --- | --- | ---: | --- | ---: | ---: |"]
        for group in sorted(by_bench[bench]):
            rows = sorted(by_bench[bench][group], key=lambda r: label(r))
            desc = WORKLOADS.get(group, group)
            for r, h in pair(rows):
                table_rows[(group, r["function"])] = (bench, desc, r, h)
                out.append(
                    "| {} | {} | {} | {} | {} | {} |".format(
                        f"{desc} (`{group}`)" if desc != group else f"`{group}`",
                        label(r),
                        fmt_time(r["ns"]),
                        label(h) if h else "",
                        fmt_time(h["ns"]) if h else "",
                        fmt_ratio(r["ns"], h["ns"]) if h else "",
                    )
                )
            if not any(not is_hand(r["function"]) for r in rows):
                for h in rows:
                    out.append(f"| `{group}` | | | {label(h)} | {fmt_time(h['ns'])} | |")
        out.append("")
    if stale:
        out += [
            "Left out as older than this run (rerun their benches to include them): "
            + ", ".join(f"`{g}`" for g in stale) + ".",
            "",
        ]
    with open(os.path.join(ROOT, "BENCHMARKS.md"), "w") as f:
        f.write("\n".join(out))

    # The README's short table.
    short = [
        "| workload (bench group) | rlx | hand-written | ratio |",
        "| --- | ---: | ---: | ---: |",
    ]
    for group, function, short_label in README_ROWS:
        hits = [v for (g, fn), v in table_rows.items() if g == group and (function is None or fn == function)]
        if not hits:
            continue
        bench, desc, r, h = sorted(hits, key=lambda v: label(v[2]))[0]
        short.append(
            "| {} (`{}`) | {} | {} | {} |".format(
                short_label,
                group,
                fmt_time(r["ns"]),
                fmt_time(h["ns"]) if h else "",
                fmt_ratio(r["ns"], h["ns"]) if h else "",
            )
        )
    short.append("")
    short.append(f"Measured {date:%Y-%m-%d} on a shared machine ({machine().split(';')[0]}).")
    readme_path = os.path.join(ROOT, "README.md")
    with open(readme_path) as f:
        readme = f.read()
    if START in readme and END in readme:
        head, rest = readme.split(START, 1)
        _, tail = rest.split(END, 1)
        readme = head + START + "\n" + "\n".join(short) + "\n" + END + tail
        with open(readme_path, "w") as f:
            f.write(readme)
    else:
        print(f"README.md has no {START} … {END} markers; its table was not written", file=sys.stderr)
    print(f"wrote BENCHMARKS.md ({len(table_rows)} rows from {', '.join(benches_run)})")


if __name__ == "__main__":
    main()
