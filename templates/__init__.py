"""Jinja2 templates that own the layout of every generated file."""
