"""hcspec reference implementation: static HC, dynamic HC and mHC in PyTorch (see DESIGN.md)."""
