from ragsync.cli import main

main()
