"""The property families: one module per family, each importing only the kit's machinery."""
