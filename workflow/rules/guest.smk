# The guest side: each built variant's programs (tools), the accelerator decision, one boot per
# variant and repetition (raw output only), and the parse of that raw output into rows. The
# parse rule has the parsers' code as input, so a parser fix re-parses without a new boot.
import math

from lab.pipeline import accel, arch


def tool_sources(wc):
    """Every file of the chapter's tools directory (the Makefile and what it builds from)."""
    exp = exp_of(wc)
    tools = exp.raw.get("tools")
    if not tools:
        return []
    return sorted(str(p) for p in exp.chapter.path(tools["dir"]).rglob("*") if p.is_file())


def workload_scripts(wc):
    """The scripts of the workloads the variant's boots run."""
    exp = exp_of(wc)
    return [str(exp.chapter.path(w["script"])) for w in exp.workloads_of(wc.variant)]


def parser_code(wc):
    """The code every parser of the chapter comes from: the shared parsers and its parse.py."""
    own = exp_of(wc).chapter.dir / "parse.py"
    shared = sorted(str(p) for p in (REPO / "lab" / "parse").glob("*.py"))
    return shared + ([str(own)] if own.is_file() else [])


rule tools:
    input:
        root=root_of,
        base="source/base.json",
        series=variant_series,
        build="build/{chapter}/{variant}/build.json",
        sources=tool_sources,
    output:
        "tools/{chapter}/{variant}/tools.json",
    params:
        job=job("tools"),
    log:
        "logs/{chapter}/tools-{variant}.log",
    benchmark:
        "benchmarks/{chapter}/tools-{variant}.tsv"
    resources:
        machine=1,
    shell:
        "{LAB} tools --job {params.job:q} --root {input.root} --base {input.base} "
        "--series {input.series} --build {input.build} --out {output} --log {log}"


def guest_lock(wc):
    """The chapter's guest lock, when it has guest packages: a new lock makes a new layer."""
    exp = exp_of(wc)
    return [str(guestlayer.lock_path(exp.chapter))] if guestlayer.requested(exp.chapter) else []


rule layer:
    """The guest's root (lab/pipeline/guestlayer.py): the toolchain root, or the chapter's layer of
    guest packages over it."""
    input:
        root="toolchain/root.json",
        lock=guest_lock,
    output:
        "layer/{chapter}.json",
    params:
        args=chapter_args,
    log:
        "logs/{chapter}/layer.log",
    benchmark:
        "benchmarks/{chapter}/layer.tsv"
    shell:
        "{LAB} layer {params.args} --root {input.root} --out {output} --log {log}"


rule accel:
    input:
        root="toolchain/root.json",
        # The probe boots one of the chapter's kernels of the host's architecture (only those
        # can use KVM); a selection that boots none never asks.
        build=lambda wc: [f"build/{wc.chapter}/{exp_of(wc).build_name(v)}/build.json"
                          for v in exp_of(wc).booted
                          if exp_of(wc).variants[v].arch == arch.HOST][:1],
    output:
        temp("accel/{chapter}/{key}.json"),
    params:
        args=boot_args,
    resources:
        machine=1,
        # a cluster job's minutes (see the boot rule): the probe's bound, twice
        # (KVM, then TCG where KVM fails), and a minute to set up
        runtime=math.ceil(2 * accel.probe_timeout() / 60) + 1,
    shell:
        "{LAB} accel {params.args} --root {input.root} --build {input.build} --out {output}"


def boot_before(wc):
    """The boot that runs just before this one (:func:`booted` order), as an order-only input:
    Snakemake's choice among ready jobs is its own, so the interleaving of the kernels' boots
    is made explicit. ``ancient`` keeps it from ever making this boot out of date."""
    order = booted(wc)
    i = order.index((wc.variant, int(wc.rep)))
    if i == 0:
        return []
    variant, rep = order[i - 1]
    return [ancient(f"boot/{wc.chapter}/{wc.key}/{variant}/rep{rep}")]


def cross_of(wc):
    """The cross stage's stamp, for a boot of another architecture (its guest tree)."""
    return (["toolchain/cross.json"] if exp_of(wc).variants[wc.variant].arch != arch.HOST
            else [])


rule boot:
    input:
        after=boot_before,
        layer="layer/{chapter}.json",
        cross=cross_of,
        build=build_of,
        tools=lambda wc: f"tools/{wc.chapter}/{exp_of(wc).build_name(wc.variant)}/tools.json",
        accel="accel/{chapter}/{key}.json",
        scripts=workload_scripts,
        guest=[str(REPO / "lab" / "pipeline" / "guest" / f) for f in ("guest-init.sh", "lib.sh")],
    output:
        temp(directory("boot/{chapter}/{key}/{variant}/rep{rep}")),
    params:
        args=boot_args,
        variant=lambda wc: repr(exp_of(wc).variants[wc.variant]),
        workloads=lambda wc: repr([(w["name"], w["script"])
                                   for w in exp_of(wc).workloads_of(wc.variant)]),
        timeouts=lambda wc: (exp_of(wc).boot_timeout, exp_of(wc).workload_timeout),
    benchmark:
        "benchmarks/{chapter}/{key}/boot-{variant}-rep{rep}.tsv"
    threads: workflow.cores
    resources:
        machine=1,
        # what a cluster job asks for (make reproduce EXECUTOR=slurm): minutes, the boot's
        # own time bound plus one to set up; memory, the guest's plus QEMU's own
        runtime=lambda wc: math.ceil(exp_of(wc).boot_timeout / 60) + 1,
        mem_mb=lambda wc: exp_of(wc).variants[wc.variant].machine.memory_mb + 1024,
    shell:
        "{LAB} boot {params.args} --layer {input.layer} --build {input.build} "
        "--tools {input.tools} --accel-json {input.accel} --variant {wildcards.variant} "
        "--rep {wildcards.rep} --out {output} --cross '{input.cross}'"


rule parse:
    input:
        boot="boot/{chapter}/{key}/{variant}/rep{rep}",
        code=parser_code,
    output:
        temp("parsed/{chapter}/{key}/{variant}/rep{rep}.json"),
    params:
        args=boot_args,
        parsers=lambda wc: [w.get("parser", "keyvalue")
                            for w in exp_of(wc).workloads_of(wc.variant)],
    shell:
        "{LAB} parse {params.args} --boot {input.boot} --out {output}"


def compare_inputs(wc):
    """The two boots a comparison reads, their kernels' builds, its script and the toolchain
    root."""
    exp = exp_of(wc)
    comp = exp.compare(wc.workload, wc.variant)
    return {"a": f"boot/{wc.chapter}/{wc.key}/{comp.baseline}/rep{wc.rep}",
            "b": f"boot/{wc.chapter}/{wc.key}/{comp.patched}/rep{wc.rep}",
            "a_build": f"build/{wc.chapter}/{exp.build_name(comp.baseline)}/build.json",
            "b_build": f"build/{wc.chapter}/{exp.build_name(comp.patched)}/build.json",
            "script": str(exp.chapter.path(comp.script)), "root": "toolchain/root.json"}


rule compare:
    input:
        unpack(compare_inputs),
    output:
        temp(directory("compare/{chapter}/{key}/{variant}/rep{rep}/{workload}")),
    params:
        args=boot_args,
    resources:
        machine=1,
        # a cluster job's minutes (see the boot rule): the script's time bound plus one
        runtime=lambda wc: math.ceil(exp_of(wc).workload_timeout / 60) + 1,
    shell:
        "{LAB} compare {params.args} --root {input.root} --baseline-boot {input.a} "
        "--patched-boot {input.b} --baseline-build {input.a_build} "
        "--patched-build {input.b_build} --workload {wildcards.workload} "
        "--variant {wildcards.variant} --rep {wildcards.rep} --out {output}"


rule parse_compare:
    input:
        compared="compare/{chapter}/{key}/{variant}/rep{rep}/{workload}",
        code=parser_code,
    output:
        temp("parsed/{chapter}/{key}/{variant}/rep{rep}/{workload}.json"),
    params:
        args=boot_args,
    shell:
        "{LAB} parse {params.args} --boot {input.compared} --out {output}"
