from gsexp.bench.cli import main

main()
