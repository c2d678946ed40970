"""The build-system integration: library manifest, dependency discovery, fingerprints, doit tasks, the
lazy converter API and the ``usdforge`` command line. Importing it does not import pxr."""

from pipeline.converters import (AssetConverterBase, MeshConverter, MjcfConverter, UrdfConverter,
                                 converter_for)
from pipeline.manifest import Library, LibraryEntry, entry_cfg, load_library
from pipeline.references import referenced_files
from pipeline.tasks import convert_tasks
