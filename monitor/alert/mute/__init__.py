"""Muting (step 2 of a cycle): silences and inhibition decide which firing alerts notify nobody."""
