from tilth.cli import entry

entry()
