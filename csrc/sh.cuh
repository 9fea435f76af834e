// Real spherical harmonics up to degree 3 (3DGS's constants and order) and their
// derivatives with respect to the unit view direction.
#pragma once

#include "config.h"

namespace sh {
constexpr float C0 = 0.28209479177387814f;
constexpr float C1 = 0.4886025119029199f;
// Scalars, not arrays: constexpr arrays are not visible in device code.
constexpr float C20 = 1.0925484305920792f, C21 = -1.0925484305920792f, C22 = 0.31539156525252005f,
                C23 = -1.0925484305920792f, C24 = 0.5462742152960396f;
constexpr float C30 = -0.5900435899266435f, C31 = 2.890611442640554f, C32 = -0.4570457994644658f,
                C33 = 0.3731763325901154f, C34 = -0.4570457994644658f, C35 = 1.445305721320277f,
                C36 = -0.5900435899266435f;
}  // namespace sh

// The degree is a template argument so that every index is a constant and the callers' arrays
// stay in registers (as a run-time value it put the preprocess backward's four arrays on the stack).

// basis[k] at direction (x, y, z) for the first (DEGREE+1)^2 bases.
template <int DEGREE>
__device__ inline void sh_basis(float x, float y, float z, float* basis) {
  basis[0] = sh::C0;
  if (DEGREE < 1) return;
  basis[1] = -sh::C1 * y;
  basis[2] = sh::C1 * z;
  basis[3] = -sh::C1 * x;
  if (DEGREE < 2) return;
  float xx = x * x, yy = y * y, zz = z * z;
  basis[4] = sh::C20 * (x * y);
  basis[5] = sh::C21 * (y * z);
  basis[6] = sh::C22 * (2 * zz - xx - yy);
  basis[7] = sh::C23 * (x * z);
  basis[8] = sh::C24 * (xx - yy);
  if (DEGREE < 3) return;
  basis[9] = sh::C30 * y * (3 * xx - yy);
  basis[10] = sh::C31 * (x * y) * z;
  basis[11] = sh::C32 * y * (4 * zz - xx - yy);
  basis[12] = sh::C33 * z * (2 * zz - 3 * xx - 3 * yy);
  basis[13] = sh::C34 * x * (4 * zz - xx - yy);
  basis[14] = sh::C35 * z * (xx - yy);
  basis[15] = sh::C36 * x * (xx - 3 * yy);
}

// d basis[k] / d(x, y, z), for k >= 1 (basis[0] is constant).
template <int DEGREE>
__device__ inline void sh_basis_grad(float x, float y, float z, float* dx, float* dy, float* dz) {
#pragma unroll
  for (int k = 0; k < MAX_SH_BASES; ++k) dx[k] = dy[k] = dz[k] = 0.f;
  if (DEGREE < 1) return;
  dy[1] = -sh::C1;
  dz[2] = sh::C1;
  dx[3] = -sh::C1;
  if (DEGREE < 2) return;
  float xx = x * x, yy = y * y, zz = z * z;
  dx[4] = sh::C20 * y;            dy[4] = sh::C20 * x;
  dy[5] = sh::C21 * z;            dz[5] = sh::C21 * y;
  dx[6] = -2 * sh::C22 * x;       dy[6] = -2 * sh::C22 * y;   dz[6] = 4 * sh::C22 * z;
  dx[7] = sh::C23 * z;            dz[7] = sh::C23 * x;
  dx[8] = 2 * sh::C24 * x;        dy[8] = -2 * sh::C24 * y;
  if (DEGREE < 3) return;
  dx[9] = sh::C30 * 6 * x * y;    dy[9] = sh::C30 * 3 * (xx - yy);
  dx[10] = sh::C31 * y * z;       dy[10] = sh::C31 * x * z;    dz[10] = sh::C31 * x * y;
  dx[11] = sh::C32 * -2 * x * y;  dy[11] = sh::C32 * (4 * zz - xx - 3 * yy);
  dz[11] = sh::C32 * 8 * y * z;
  dx[12] = sh::C33 * -6 * x * z;  dy[12] = sh::C33 * -6 * y * z;
  dz[12] = sh::C33 * (6 * zz - 3 * xx - 3 * yy);
  dx[13] = sh::C34 * (4 * zz - 3 * xx - yy);  dy[13] = sh::C34 * -2 * x * y;
  dz[13] = sh::C34 * 8 * x * z;
  dx[14] = sh::C35 * 2 * x * z;   dy[14] = sh::C35 * -2 * y * z;   dz[14] = sh::C35 * (xx - yy);
  dx[15] = sh::C36 * 3 * (xx - yy);  dy[15] = sh::C36 * -6 * x * y;
}
