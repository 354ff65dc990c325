from porter.cli import main

main()
