"""The command line: one click group, its options and the investigate/fleet views."""
