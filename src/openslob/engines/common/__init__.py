"""What every engine shares, written once."""
