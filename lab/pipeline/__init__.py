"""The pipeline: one module per stage (toolchain root, source, series, config and build,
inspect, tools, layer, boot, parse, publish), the driver (``reproduce``) and ``reparse``.

Data flows one way through the stages; each reads the stamps of the stages before it
(:mod:`lab.pipeline.stamps`) and can be re-run alone. ``python -m lab.pipeline`` is the command
line the Snakefile's rules call (:mod:`lab.pipeline.cli`).
"""
