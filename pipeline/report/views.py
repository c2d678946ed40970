"""The views an asset's page shows, by name: the direction each looks from (towards the camera, Z up).
The first is the thumbnail's. No VTK here: the doit process reads this to name the pictures."""

VIEWS = {"iso": (1.0, -1.2, 0.8), "front": (1.0, 0.0, 0.15), "side": (0.0, -1.0, 0.15), "top": (0.0, -0.01, 1.0)}
