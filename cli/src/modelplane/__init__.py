"""The modelplane command-line tool."""
