"""Training experiments of the papers (TinyGPT shape sweep, toy superposition, a small SAE), resumable."""
