"""Output: rich console tables, JSON, (HTML and plots with the plots extra)."""
