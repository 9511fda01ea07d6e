# Publish: one run directory data/runs/<chapter>/<run-id>/ from everything the run made. The
# run id is given here, when the run is complete; the directory is written aside and renamed
# into place, so an interrupted publish leaves nothing.


def booted(wc):
    """(variant, rep) of every boot in the order they run (the boot rule chains them):
    :attr:`lab.pipeline.experiment.Experiment.boots`."""
    return exp_of(wc).boots


rule publish:
    input:
        root="toolchain/root.json",
        cross=lambda wc: ["toolchain/cross.json"] if exp_of(wc).cross else [],
        layer="layer/{chapter}.json",
        base="source/base.json",
        series=lambda wc: [f"series/{wc.chapter}/{t}.json" for t in exp_of(wc).trees],
        builds=lambda wc: [f"build/{wc.chapter}/{b}/build.json" for b in exp_of(wc).builds],
        build_times=lambda wc: [f"benchmarks/{wc.chapter}/build-{b}.tsv"
                                for b in exp_of(wc).builds],
        # what a machine's caches cost it once (the cost model of the pipeline appendix)
        setup_times=["benchmarks/root.tsv", "benchmarks/source.tsv"],
        tools=lambda wc: [f"tools/{wc.chapter}/{b}/tools.json" for b in exp_of(wc).kernels],
        inspected=lambda wc: [f"inspect/{wc.chapter}/{v}.json" for v in exp_of(wc).variants
                              if exp_of(wc).build_name(v) in exp_of(wc).kernels],
        boots=lambda wc: [f"boot/{wc.chapter}/{wc.key}/{v}/rep{r}" for v, r in booted(wc)],
        parsed=lambda wc: [f"parsed/{wc.chapter}/{wc.key}/{v}/rep{r}.json"
                           for v, r in booted(wc)],
        compared=lambda wc: [f"parsed/{wc.chapter}/{wc.key}/{c.patched}/rep{r}/{c.workload}.json"
                             for c, r in exp_of(wc).compare_jobs],
        # the comparisons' raw output, which the parsed files name (kept until published)
        comparisons=lambda wc: [f"compare/{wc.chapter}/{wc.key}/{c.patched}/rep{r}/{c.workload}"
                                for c, r in exp_of(wc).compare_jobs],
    output:
        temp("published/{chapter}/{key}.json"),
    params:
        args=common,
    shell:
        "{LAB} publish {params.args} --root {input.root} --layer {input.layer} --base {input.base} "
        "--series {input.series} --builds {input.builds} --build-times {input.build_times} "
        "--setup-times {input.setup_times} "
        "--tools {input.tools} --inspected {input.inspected} --parsed {input.parsed} "
        "--compared {input.compared} --out {output} --cross '{input.cross}'"
