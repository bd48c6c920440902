"""Near-duplicate images: perceptual hashes (perceptual_hash.py), the search for pairs across
splits (search.py), their confirmation (confirmation.py), a generation's pairs (pairs.py) and
its hashes file (hashes_file.py)."""
