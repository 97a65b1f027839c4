"""The error type for faults a user can cause: shown as one sentence, never a traceback."""


class UserError(Exception):
    """A fault the user can act on; `str()` is the one sentence to show.

    `exit_code` lets a subcommand keep its documented exit codes.
    """

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code
