# Session 2026-12-03 c (issue 18): build this tree and the previous commit (old), GPU tests of the
# launch cuts, lego fast + peer, A/B step profiles new vs old on one checkpoint, then ablations.
source .device/env.sh
set -x
mkdir -p /tmp/ft /tmp/shared/data/nerf_synthetic /tmp/oldsrc
cp -r .device/weights /tmp/shared/weights; cp -r .device/scenes /tmp/shared/data/scenes
cp -r .device/mini_lego /tmp/shared/data/nerf_synthetic/lego; cp .device/peer_train_gsplat.py /tmp/peer.py
tar xzf .device/old.tgz -C /tmp/oldsrc
export GSEXP_SHARED=/tmp/shared GSEXP_BUILD_DIR=/tmp/build
NEW=$PWD; OLD=/tmp/oldsrc/old
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date
python tools/webp_stage.py unpack .device/lego_webp /tmp/lego > /tmp/ft/unwebp.log 2>&1 &
python -c "import gsplat.cuda._backend as b; print('gsplat', b._C is not None)" > /tmp/ft/gsplat_build.log 2>&1 &
(cd $OLD && PYTHONPATH=$OLD:/tmp/site GSEXP_BUILD_DIR=/tmp/build_old MAX_JOBS=6 python -c "from gsexp.render.cuda.build import load; load(); print('built old')" > /tmp/ft/build_old.log 2>&1) &
MAX_JOBS=10 python -c "from gsexp.render.cuda.build import load; load(); print('built')" > /tmp/ft/build.log 2>&1 || { tail -30 /tmp/ft/build.log; echo BUILD_FAILED; exit 1; }
date; echo BUILT
if [ -z "$SKIP_TESTS" ]; then
T="timeout 300 python -m pytest -q -p no:cacheprovider -rf"
$T tests/test_cuda_ssim.py tests/test_strategy.py tests/test_optim.py > /tmp/ft/t_ops.log 2>&1 &
$T tests/test_cuda_rasterizer.py > /tmp/ft/t_rast.log 2>&1 &
$T tests/test_cuda_gemm_backward.py tests/test_cuda_matrix_blends.py > /tmp/ft/t_gemm.log 2>&1 &
wait
date; tail -n3 /tmp/ft/t_ops.log /tmp/ft/t_rast.log /tmp/ft/t_gemm.log; tail -2 /tmp/ft/build_old.log
grep -qE "[0-9]+ (failed|error)" /tmp/ft/t_ops.log /tmp/ft/t_rast.log && { echo TESTS_FAILED; exit 1; }
echo TESTS_OK
fi
R="python experiments/fast_training/run.py --data /tmp/lego --set lpips_net=alex"
timeout 600 $R --out /tmp/ft/seq --configs fast --peer /tmp/peer.py > /tmp/ft/seq.log 2>&1
date; echo SEQ_DONE
for i in 1 2; do
  timeout 120 python tools/profile_step.py /tmp/ft/seq/fast --steps 300 > /tmp/ft/profile_new$i.log 2>&1; tail -1 /tmp/ft/profile_new$i.log
  (cd $OLD && PYTHONPATH=$OLD:/tmp/site GSEXP_BUILD_DIR=/tmp/build_old timeout 120 python tools/profile_step.py /tmp/ft/seq/fast --steps 300 > /tmp/ft/profile_old$i.log 2>&1); tail -1 /tmp/ft/profile_old$i.log
done
date; echo PROFILES_DONE
timeout 900 $R --out /tmp/ft/abl --configs no_fused,with_sync,sparse_adam,vanilla_fast > /tmp/ft/abl.log 2>&1
date; echo ALL_DONE
