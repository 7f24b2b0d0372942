"""mini-K3: a miniature Kimi-K3-shaped model (latent attention + mixture of experts)."""

__version__ = "0.1.0"
