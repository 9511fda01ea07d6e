# The kernel side: toolchain root, base source, series trees, configurations, builds, and the
# inspection of each built vmlinux. All of it is cached in the work directory and reused by
# every later run whose inputs and params are unchanged.
import os

from lab.pipeline import arch, crosslayer, source, toolchain


def exp_of(wc):
    return EXPS[wc.chapter]


def variant_series(wc):
    return f"series/{wc.chapter}/{exp_of(wc).all_variants[wc.variant].tree}.json"


def build_of(wc):
    return f"build/{wc.chapter}/{exp_of(wc).build_name(wc.variant)}/build.json"


def fragments_of(wc):
    return [str(p) for p in exp_of(wc).fragment_paths(wc.variant)]


def root_of(wc):
    """The stamp of the tree a variant's kernel stages run in: the toolchain root, or, for a
    variant of another architecture, the cross layer over it (lab/pipeline/crosslayer.py)."""
    cross = exp_of(wc).all_variants[wc.variant].arch != arch.HOST
    return "toolchain/cross.json" if cross else "toolchain/root.json"


def series_files(wc):
    ser = SERIES[wc.chapter]
    meta = ser.directory / "meta.yaml"
    return [str(p) for p in ser.files] + [str(ser.directory / "series")] + (
        [str(meta)] if meta.is_file() else [])


rule root:
    output:
        "toolchain/root.json",
    params:
        key=toolchain.root_key(),
    log:
        "logs/root.log",
    benchmark:
        "benchmarks/root.tsv"
    resources:
        machine=1,
    shell:
        "{LAB} root --out {output} --log {log}"


rule source:
    output:
        "source/base.json",
    params:
        pin=source.pin()["sha256"],
        src=os.environ.get("KERNEL_SRC", ""),
        tarball=os.environ.get("KERNEL_TARBALL", ""),
    log:
        "logs/source.log",
    benchmark:
        "benchmarks/source.tsv"
    shell:
        "{LAB} source --out {output} --log {log}"


rule cross:
    """gcc-15's cross compilers over the toolchain root, and each cross architecture's guest
    tree (its static busybox), made once per lock."""
    input:
        root="toolchain/root.json",
        locks=[str(p) for p in crosslayer.lock_files()],
    output:
        "toolchain/cross.json",
    log:
        "logs/cross.log",
    benchmark:
        "benchmarks/cross.tsv"
    resources:
        machine=1,
    shell:
        "{LAB} cross --root {input.root} --out {output} --log {log}"


rule series:
    input:
        base="source/base.json",
        patches=series_files,
    output:
        "series/{chapter}/{tree}.json",
    params:
        job=job("series"),
        sha=lambda wc: SERIES[wc.chapter].sha256,
    resources:
        machine=1,
    shell:
        "{LAB} series --job {params.job:q} --base {input.base} --tree {wildcards.tree} "
        "--out {output}"


rule config:
    input:
        base="source/base.json",
        root=root_of,
        series=variant_series,
        fragments=fragments_of,
    output:
        "config/{chapter}/{variant}.config",
    params:
        job=job("config"),
    log:
        "logs/{chapter}/config-{variant}.log",
    resources:
        machine=1,
    shell:
        "{LAB} config --job {params.job:q} --base {input.base} --root {input.root} "
        "--series {input.series} --out {output} --log {log}"


rule build:
    input:
        base="source/base.json",
        root=root_of,
        series=variant_series,
        config="config/{chapter}/{variant}.config",
        # also here: a fragment fixed after a failed config must rebuild, not reuse the
        # last good image (Snakemake does not rerun a job for a missing intermediate file)
        fragments=fragments_of,
    output:
        # the stamp only: a variant whose build the experiment expects to fail has no image
        stamp="build/{chapter}/{variant}/build.json",
    params:
        job=job("build"),
    log:
        "logs/{chapter}/build-{variant}.log",
    benchmark:
        "benchmarks/{chapter}/build-{variant}.tsv"
    threads: workflow.cores
    resources:
        machine=1,
    shell:
        "{LAB} build --job {params.job:q} --base {input.base} --root {input.root} "
        "--series {input.series} --config {input.config} --out {output.stamp} --log {log}"


rule inspect:
    input:
        root=root_of,
        build=build_of,
        code=str(REPO / "lab" / "pipeline" / "inspect.py"),
    output:
        "inspect/{chapter}/{variant}.json",
    params:
        job=job("inspect"),
    resources:
        machine=1,
    shell:
        "{LAB} inspect --job {params.job:q} --root {input.root} --build {input.build} "
        "--out {output}"
