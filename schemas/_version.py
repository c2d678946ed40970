"""usdforge's version: part of every config digest, so upgrading usdforge re-converts."""

__version__ = "0.1.0"
