"""The ground floor: leaves every layer may use (errors, printable text, time parsing)."""
