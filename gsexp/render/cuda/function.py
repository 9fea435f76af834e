"""The autograd wrapper around the compiled stages: forward from the chosen blend kernel,
backward from the one exact fp32 kernel every blend shares."""
from __future__ import annotations

import torch

from gsexp.render.cuda.build import load


def camera_values(camera) -> list[float]:
    """The 23 numbers the C++ side reads: view rows [R | t], intrinsics, tan(fov/2), centre, size."""
    w2c = camera.world_to_camera.detach().to("cpu", torch.float64)
    center = -w2c[:3, :3].T @ w2c[:3, 3]
    tan_x, tan_y = camera.tan_half_fov
    return (w2c[:3].reshape(-1).tolist() + [camera.fx, camera.fy, camera.cx, camera.cy, tan_x, tan_y]
            + center.tolist() + [camera.width, camera.height])


class Rasterize(torch.autograd.Function):
    """(means, scales, unit quats, opacities, sh, means2d holder) -> image [3,H,W], alpha [H,W].

    The holder is a zero [N,2] leaf: its gradient is the screen-space gradient the
    densification strategies read; its values are filled with the projected means."""

    @staticmethod
    def forward(ctx, means, scales, quats, opacities, sh, means2d_holder, settings):
        ext = load()
        outs, stage_ms = ext.rasterize_forward(means, scales, quats, opacities, sh, settings["degree"],
                                               settings["camera"], settings["background"],
                                               settings["blend"], settings["timing"])
        image, final_t, n_contrib, means2d, conic_opacity, colors, depths, radii, point_list, ranges = outs
        settings["stage_ms"].update(stage_ms)
        ctx.settings = settings
        ctx.save_for_backward(means, scales, quats, sh, radii, means2d, conic_opacity, colors, point_list,
                              ranges, final_t, n_contrib)
        alpha = 1 - final_t
        ctx.mark_non_differentiable(n_contrib, radii, means2d, depths)
        return image, alpha, n_contrib, radii, means2d, depths

    @staticmethod
    def backward(ctx, grad_image, grad_alpha, *_):
        s = ctx.settings
        means, scales, quats, sh, radii, means2d, conic_opacity, colors, point_list, ranges, final_t, n_contrib = \
            ctx.saved_tensors
        grads, stage_ms = load().rasterize_backward(
            means, scales, quats, sh, s["degree"], s["camera"], s["background"], radii, means2d, conic_opacity,
            colors, point_list, ranges, final_t, n_contrib, grad_image.contiguous(), grad_alpha.contiguous(),
            s["timing"])
        s["stage_ms"].update(stage_ms)
        g_means, g_scales, g_quats, g_opacity, g_sh, g_means2d = grads
        return g_means, g_scales, g_quats, g_opacity, g_sh, g_means2d, None
