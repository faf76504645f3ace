from openslob.cli import main

main()
