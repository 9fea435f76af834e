"""Render benchmark: time rasterizers on fixed cameras, compare their images.

    python -m gsexp.bench --ply scene.ply [--rasterizers torch,tc_gs:precision=fp16]
    python -m gsexp.bench --checkpoint run/checkpoints/step_030000.pt --cameras test \\
        --data-kind blender --data-path ../shared/data/nerf_synthetic/lego

A rasterizer spec is `variant[:key=value]...`: variant is torch, vanilla, gemm_gs or tc_gs
(gsexp.render.settings) or gsplat; keys are the variant's settings, e.g. `vanilla`,
`gemm_gs:precision=tf32`, `tc_gs:precision=fp16:g2l=false`, `tc_gs:intersect=accutile`,
`torch:blend=tcgs:precision=fp16`, plus `sh_degree=N` (values true/false, numbers, or text).
For each rasterizer and camera: `--warmup` untimed renders, then `--frames` timed ones.
Median and p90 are taken over all timed frames of all cameras. PSNR is against the
first rasterizer's images. gsplat, when importable on a CUDA device, runs as a peer.
"""
