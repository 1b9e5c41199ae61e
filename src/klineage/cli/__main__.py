from klineage.cli import main

main()
