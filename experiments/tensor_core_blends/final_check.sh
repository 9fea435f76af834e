# The last check of the study (on the GPU machine, from the repository root, with $OUT set).
source .device/env.sh; export GSEXP_SHARED=$PWD/.device/shared
python -m gsexp.render.cuda.build > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
python -m pytest -q -s -p no:cacheprovider tests/test_cuda_build.py tests/test_cuda_matrix_blends.py tests/test_cuda_rasterizer.py > $OUT/pytest.log 2>&1; tail -2 $OUT/pytest.log; grep -E "^FAILED|^E  |gradient relative" $OUT/pytest.log | cut -c1-150 | head -20
python -m gsexp.bench --ply $GSEXP_SHARED/data/scenes/biker.compressed.ply --rasterizers cuda,cuda:gemm:precision=fp16,cuda:tcgs:precision=fp16 --width 1920 --height 1080 --frames 10 --no-gsplat --json $OUT/bench_final.json 2>&1 | tail -6
