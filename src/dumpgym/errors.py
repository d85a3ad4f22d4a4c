"""Errors the user can fix: the command line prints each as one line and exits with status 2."""


class GymError(ValueError):
    """Bad input or a bad place on disk, explained in one line for the user."""


class BuildFolderError(GymError):
    """`dumpgym build --out` names a folder the build may not replace."""


class CorpusFolderError(GymError):
    """The folder of added programs is damaged, locked out, or cannot be written."""


class Stopped(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped a command, which has said so in one line and written nothing; the
    command line exits with status 130 (a KeyboardInterrupt, so whatever catches those catches it)."""


class ProgramError(GymError):
    """Bad input naming a program or its arguments; the message is one line for the user."""
