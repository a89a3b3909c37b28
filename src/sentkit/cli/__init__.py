"""Command-line room: `sentkit <command>`; each room contributes its own commands."""
