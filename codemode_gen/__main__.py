from codemode_gen.cli import main

main()
