"""The one way usdforge parses XML: lxml with entity resolution, DTDs and network access off."""

from __future__ import annotations

from lxml import etree

#: Parser for untrusted XML (URDF, MJCF, COLLADA): no entities, no DTD, no network; keeps line numbers.
SAFE_XML = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, remove_comments=True)
