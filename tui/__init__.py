"""Everything a person sees: the Textual app, its screens and widgets."""
