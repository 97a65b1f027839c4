"""The error type for faults a user can cause: shown as one sentence, never a traceback."""


class UserError(Exception):
    """A fault the user can act on; `str()` is the one sentence to show.

    It exits 3, "could not run" in stormdeck's one exit-code table (stormdeck
    --help): a finding's codes (1 warning, 2 critical) must never mean a fault of
    the input. `exit_code` lets a subcommand keep another documented code.
    """

    def __init__(self, message: str, exit_code: int = 3) -> None:
        super().__init__(message)
        self.exit_code = exit_code
