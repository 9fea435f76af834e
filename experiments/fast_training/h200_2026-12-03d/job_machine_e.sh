#!/bin/bash
# One GPU session: build this tree (new) and main's csrc (old), GPU tests, interleaved lego_fast
# rounds of fast / vanilla_fast, A/B step profiles old vs new, viewer overhead, PLY, peer.
set -u
R=$PWD; F=/tmp/ft; mkdir -p $F
export GSEXP_SHARED=$R/.device/shared
log() { echo "[$(date +%T)] $*" | tee -a $F/steps.log; }
log start; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader >> $F/steps.log
python tools/webp_stage.py unpack .device/lego_webp /tmp/lego > $F/unpack.log 2>&1 &
mkdir -p /tmp/old && tar -C $R --exclude=./.device -cf - . | tar -C /tmp/old -xf - && rm -rf /tmp/old/csrc && tar -C /tmp/old -xzf .device/old_csrc.tgz
build() { (cd $1 && PYTHONPATH=$1:/tmp/site GSEXP_BUILD_DIR=$2 python -c "from gsexp.render.cuda import build; build.load()") > $F/build_$3.log 2>&1; echo "build $3 rc=$?" >> $F/steps.log; }
build $R /tmp/bnew new & build /tmp/old /tmp/bold old & wait
log built
export GSEXP_BUILD_DIR=/tmp/bnew
timeout 420 python -m pytest -q -p no:cacheprovider tests/test_cuda_rasterizer.py tests/test_cuda_build.py tests/test_cuda_intersect.py tests/test_cuda_matrix_blends.py tests/test_cuda_gemm_backward.py > $F/tests_new.txt 2>&1
TRC=$?; log "tests new rc=$TRC"; tail -3 $F/tests_new.txt >> $F/steps.log
if [ $TRC -ne 0 ]; then T=/tmp/old; export GSEXP_BUILD_DIR=/tmp/bold; log "training with OLD tree"; else T=$R; fi
wait
train() { (cd $T && PYTHONPATH=$T:/tmp/site python experiments/fast_training/run.py --data /tmp/lego --set lpips_net=alex --out $F/round$1 --configs $2 > $F/round$1_$(echo $2 | tr , _).log 2>&1); log "round $1 $2 rc=$?"; }
prof() { (cd $1 && PYTHONPATH=$1:/tmp/site GSEXP_BUILD_DIR=$2 python tools/profile_step.py $F/round1/fast --steps 300 > $F/prof_$3.txt 2>&1); log "prof $3 rc=$?"; grep -i "per step" $F/prof_$3.txt | head -3 >> $F/steps.log; }
train 1 fast,vanilla_fast
if [ $TRC -eq 0 ]; then prof $R /tmp/bnew new1; prof /tmp/old /tmp/bold old1; prof $R /tmp/bnew new2; prof /tmp/old /tmp/bold old2; fi
train 2 vanilla_fast,fast
(cd $T && PYTHONPATH=$T:/tmp/site python experiments/viewer/overhead.py $F/round1/fast --steps 1000 --rounds 4 --json $F/overhead.json > $F/overhead.txt 2>&1); log "overhead rc=$?"
mkdir -p /tmp/ft_ply && split -b 15m $F/round1/fast/point_cloud.ply /tmp/ft_ply/lego_fast.ply.part_ ; log "ply split"
train 3 fast,vanilla_fast
(cd $T && PYTHONPATH=$T:/tmp/site python .device/peer_train_gsplat.py --kind blender --path /tmp/lego --iters 30000 --out $F/gsplat.json > $F/peer.log 2>&1); log "peer rc=$?"
log done
