"""The autograd wrapper around the compiled stages: forward from the chosen blend kernel,
backward from the blend backward every blend shares (exact, or its sums on tensor cores:
settings.backward)."""
from __future__ import annotations

import numpy as np
import torch

from gsexp.render.cuda.build import load


def camera_values(camera) -> tuple[float, ...]:
    """The 23 numbers the C++ side reads: view rows [R | t], intrinsics, tan(fov/2), centre, size.
    numpy, not torch: a render calls this once, and tiny torch ops cost more than the kernels.
    Kept on the camera with the matrix they came from (the object itself, so that its id is never
    reused) and its version: a camera on the GPU would otherwise cost a device-to-host copy, and a
    sync, per render; a new matrix or an in-place edit recomputes them."""
    w2c = camera.world_to_camera
    key = (w2c._version, camera.fx, camera.fy, camera.cx, camera.cy, camera.width, camera.height)
    cached = getattr(camera, "_gsexp_values", None)
    if cached is not None and cached[0] is w2c and cached[1] == key:
        return cached[2]
    m = w2c.detach().cpu().numpy().astype(np.float64)
    center = -m[:3, :3].T @ m[:3, 3]
    tan_x, tan_y = camera.tan_half_fov
    values = tuple(m[:3].reshape(-1).tolist() + [camera.fx, camera.fy, camera.cx, camera.cy, tan_x, tan_y]
                   + center.tolist() + [camera.width, camera.height])
    camera._gsexp_values = (w2c, key, values)
    return values


class Rasterize(torch.autograd.Function):
    """(means, log_scales, quats, opacity_logits, sh, sh_rest, means2d holder) -> image [3,H,W], alpha [H,W],
    n_contrib, radii, depths [N], and with options.depth the accumulated depth sum w z [H,W] (else None).

    The parameters are the raw ones: the kernels apply exp, normalise and sigmoid. sh is
    [N, bases, 3], or with sh_rest (not None) the DC term [N,1,3] and the other bases, as training
    keeps them. The holder is an [N,2] leaf the kernel fills with the projected means; its gradient
    is the screen-space gradient the densification strategies read. `call` carries the degree,
    camera, background and options in, and stage_ms and num_pairs out; with options.absgrad,
    call["absgrad"] (an [N,2] tensor) gets the backward's AbsGS sums added."""

    @staticmethod
    def forward(ctx, means, log_scales, quats, opacity_logits, sh, sh_rest, means2d, call):
        outs, stage_ms = load().rasterize_forward(
            means, log_scales, quats, opacity_logits, sh, sh_rest, means2d, call["degree"], call["camera"],
            call["background"], call["options"], call["capacity"], None, None)
        image, final_t, n_contrib, conic_opacity, colors, depths, radii, point_list, ranges, order, count, depth = outs
        call["stage_ms"].update(stage_ms)
        call["num_pairs"] = count[0] if call["capacity"] else len(point_list)  # with a capacity: not read back
        ctx.call, ctx.order = call, order
        ctx.save_for_backward(means, log_scales, quats, opacity_logits, sh, sh_rest, radii, means2d, conic_opacity,
                              colors, point_list, ranges, final_t, n_contrib,
                              depths if depth is not None else None)  # the depth channel's z
        ctx.mark_non_differentiable(n_contrib, radii, depths)
        ctx.set_materialize_grads(False)  # an unused depth image then comes back None, not zeros
        return image, 1 - final_t, n_contrib, radii, depths, depth

    @staticmethod
    def backward(ctx, grad_image, grad_alpha, _n_contrib, _radii, _depths, grad_depth):
        c = ctx.call
        saved = ctx.saved_tensors
        final_t = saved[12]  # its shape: the gradients of unused outputs are zeros
        if grad_image is None:
            grad_image = final_t.new_zeros((3, *final_t.shape))
        if grad_alpha is None:
            grad_alpha = torch.zeros_like(final_t)
        # No gradient for the depth image (unused by the loss): its term is zero, the plain kernels run.
        depth = (saved[14], grad_depth.contiguous()) if grad_depth is not None else (None, None)
        grads, stage_ms = load().rasterize_backward(
            *saved[:6], c["degree"], c["camera"], c["background"], *saved[6:12], ctx.order, *saved[12:14],
            grad_image.contiguous(), grad_alpha.contiguous(), c["options"], *depth)
        c["stage_ms"].update(stage_ms)
        *grads, absgrad = grads
        if absgrad is not None:
            c["absgrad"].add_(absgrad)
        return (*grads, None)
