"""One image: open, check and normalize it (Pillow), and container checks."""
