"""Cfg classes (attrs), their cattrs converter, the config digest and the USD writer."""

from schemas.converter_cfgs import LOCATION_FIELDS, AssetConverterBaseCfg, MeshConverterCfg
from schemas.physics import (MESH_APPROXIMATIONS, CollisionBaseCfg, MassPropertiesCfg, MeshCollisionBaseCfg,
                             RigidBodyBaseCfg)
from schemas.serialization import (ConfigError, cfg_from_json, cfg_from_toml, cfg_to_dict, cfg_to_json,
                                   cfg_to_toml, converter, structure_cfg)
from schemas._version import __version__
from schemas.digest import DIGEST_EXCLUDED_FIELDS, config_digest
