"""MuJoCo contact semantics on the colliders: physics materials, MuJoCo's per-geom contact parameters,
which geoms may touch (contype/conaffinity, welds, parent filtering, ``<contact><exclude>``), and
``self_collision``.

- Physics materials: one ``UsdPhysics.MaterialAPI`` material per distinct geom ``friction`` (sliding →
  static and dynamic friction; torsional and rolling → ``newton:torsionalFriction`` /
  ``newton:rollingFriction``), bound to each collider for the "physics" purpose and, because MuJoCo's
  USD decoder only reads that binding, for all purposes too (colliders are never rendered).
- ``MjcCollisionAPI`` on each collider: condim, priority, solmix, solref, solimp, group; margin and gap
  (when not zero) as ``newton:contactMargin``/``newton:contactGap`` (``NewtonCollisionAPI``, newton layer),
  which MuJoCo 4.0's decoder reads as margin and gap (it calls ``mjc:margin``/``mjc:gap`` deprecated) and
  Newton 1.8 as its shape margin and gap (equal to its ``add_mjcf``'s, measured);
  shell inertia (the geom's or its mesh's) as ``newton:massModel = "shell"`` (``NewtonMassAPI``), a mesh's
  ``maxhullvert`` as ``newton:maxHullVertices`` (``NewtonMeshCollisionAPI``; -1, no limit, included:
  unsaid, Newton 1.8 limits hulls to 64 vertices); a mesh's
  ``convex``/``exact`` inertia, which Newton's schema cannot say, as the source datum ``mjcf:meshInertia``
  (MuJoCo 4.0 calls ``mjc:inertia`` deprecated; bodies carry their compiled mass, so no reader needs it);
  MuJoCo's default ``legacy`` is left unsaid.
- contype/conaffinity: one ``UsdPhysics.CollisionGroup`` per (contype, conaffinity) class, filtering the
  classes MuJoCo never lets collide (``contype1 & conaffinity2 == 0`` both ways), when there is more
  than one class or a class that does not collide with itself.
- Body pairs MuJoCo never lets touch (same weld, welded parent/child, excluded, no compatible geoms),
  and with ``self_collision`` off every pair of one articulation, as ``UsdPhysics.FilteredPairsAPI`` on
  the bodies (MuJoCo's decoder reads these as ``<exclude>``).
"""

from __future__ import annotations

import itertools

import mujoco
from pxr import Sdf, Usd

from usdforge.rules.usd import layer as sdf
from usdforge.rules.mjcf.geoms import MESH
from usdforge.rules.mjcf.usd import MjcfUsd, set_all, set_custom
from usdforge.rules.usd.stage import schema_attribute, unique_name

#: MuJoCo's mesh inertia modes (``mjtMeshInertia``) → ``mjc:inertia`` tokens.
MESH_INERTIA = {int(v): v.name.removeprefix("mjMESH_INERTIA_").lower()
                for v in mujoco.mjtMeshInertia.__members__.values()}
#: contype/conaffinity of a visual geom made a collider by ``collision_from_visuals``: MuJoCo's defaults.
DEFAULT_CONTACT_CLASS = (1, 1)


def collider_paths(usd: MjcfUsd) -> dict[int, list[Sdf.Path]]:
    """MuJoCo geom id → the prims carrying its ``CollisionAPI`` (the primitive, or each mesh part).

    Shape prims are named as the shared writer names them: ``<link>/collisions/<shape>``, made unique in
    the order of the link's collision shapes.
    """
    layer = usd.ctx.layer("physics")
    shape_paths: dict[tuple[str, str], Sdf.Path] = {}
    for link in usd.robot.links:
        taken: set[str] = set()
        scope = usd.ctx.link_paths[link.name].AppendChild("collisions")
        for shape in link.shapes:
            if shape.collision:
                shape_paths[(link.name, shape.name)] = scope.AppendChild(unique_name(shape.name, taken))
    found: dict[int, list[Sdf.Path]] = {}
    for geom, key in usd.geoms.collider.items():
        found[geom] = []
        stack = [layer.GetPrimAtPath(shape_paths[key])]
        while stack:  # the shape's spec and its mesh parts' specs, in the physics layer
            spec = stack.pop()
            if spec is None:
                continue
            if "PhysicsCollisionAPI" in sdf.applied(spec):
                found[geom].append(spec.path)
            stack.extend(reversed(list(spec.nameChildren)))
    return found


def contact_class(model: mujoco.MjModel, geom: int) -> tuple[int, int]:
    """(contype, conaffinity) of a collider; a visual geom made a collider gets MuJoCo's default (1, 1)."""
    contype, conaffinity = int(model.geom_contype[geom]), int(model.geom_conaffinity[geom])
    return (contype, conaffinity) if contype or conaffinity else DEFAULT_CONTACT_CLASS


def classes_collide(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """MuJoCo's rule: ``contype1 & conaffinity2 or contype2 & conaffinity1``."""
    return bool(a[0] & b[1] or b[0] & a[1])


def author_physics_materials(usd: MjcfUsd, colliders: dict[int, list[Sdf.Path]]) -> None:
    """One physics material per distinct friction, bound to the colliders (see the module docstring)."""
    model = usd.loaded.model
    if not (usd.authored("physics") or usd.authored("newton")):
        return
    physics = usd.ctx.stage("physics")
    scope = usd.scope("PhysicsMaterials")
    materials: dict[tuple[float, float, float], Sdf.Path] = {}
    for geom in sorted(colliders):
        friction = tuple(round(float(v), 9) for v in model.geom_friction[geom])
        if friction not in materials:
            path = scope.AppendChild(f"friction_{len(materials)}")
            if usd.authored("physics"):
                # UsdShade.Material with UsdPhysics.MaterialAPI, as their modules author them (not loaded).
                if not materials:
                    physics.DefinePrim(scope, "Scope")
                material = physics.DefinePrim(path, "Material")
                material.AddAppliedSchema("PhysicsMaterialAPI")
                schema_attribute(material, "physics:staticFriction", friction[0])
                schema_attribute(material, "physics:dynamicFriction", friction[0])
            set_all(usd.spec("newton", path), {"newton:torsionalFriction": friction[1],
                                                   "newton:rollingFriction": friction[2]}, ["NewtonMaterialAPI"])
            materials[friction] = path
        for path in colliders[geom] if usd.authored("physics") else ():
            spec = usd.spec("physics", path)
            sdf.apply_schemas(spec, "MaterialBindingAPI")
            sdf.relationship(spec, "material:binding", [materials[friction]])
            sdf.relationship(spec, "material:binding:physics", [materials[friction]])


def author_collision_parameters(usd: MjcfUsd, colliders: dict[int, list[Sdf.Path]]) -> None:
    """``MjcCollisionAPI`` (and ``MjcMeshCollisionAPI``) on every collider prim."""
    model, spec = usd.loaded.model, usd.loaded.spec
    if not (usd.authored("mujoco") or usd.authored("newton")):
        return
    # MjSpec's element lists are rebuilt on every access: taken once (per geom, it was O(N²)).
    spec_geoms, spec_meshes = list(spec.geoms), list(spec.meshes)
    for geom in sorted(colliders):
        values = {"mjc:condim": int(model.geom_condim[geom]), "mjc:priority": int(model.geom_priority[geom]),
                  "mjc:solmix": model.geom_solmix[geom], "mjc:solref": model.geom_solref[geom],
                  "mjc:solimp": model.geom_solimp[geom], "mjc:group": int(model.geom_group[geom])}
        shell = int(spec_geoms[geom].typeinertia) == int(mujoco.mjtGeomInertia.mjINERTIA_SHELL)
        mesh_values, newton = {}, {}
        if int(model.geom_type[geom]) == MESH:
            mesh = spec_meshes[int(model.geom_dataid[geom])]
            inertia = MESH_INERTIA[int(mesh.inertia)]
            shell = shell or inertia == "shell"
            if inertia in ("convex", "exact"):
                # Newton's massModel says solid or shell only, and MuJoCo 4.0 calls mjc:inertia deprecated:
                # the mode is kept as source data (bodies carry their compiled mass, so no reader needs it).
                mesh_values["mjcf:meshInertia"] = inertia
            # Always said, -1 (no limit) included: unsaid, Newton limits hulls to 64 vertices.
            newton["newton:maxHullVertices"] = int(mesh.maxhullvert)
        # MuJoCo 4.0's decoder reads margin and gap from Newton's attributes (its own are deprecated);
        # zero, MuJoCo's default and the decoder's, is left unsaid. Likewise shell inertia
        # (newton:massModel); the hull's vertex budget (-1: no limit) is said on every mesh collider.
        contact = {name: float(value) for name, value in (("newton:contactMargin", model.geom_margin[geom]),
                                                          ("newton:contactGap", model.geom_gap[geom])) if value}
        for path in colliders[geom]:
            prim = usd.spec("mujoco", path)
            set_all(prim, values, ["MjcCollisionAPI"])
            for name, value in mesh_values.items():
                set_custom(prim, name, value)
            if contact:
                set_all(usd.spec("newton", path), contact, ["NewtonCollisionAPI"])
            if newton:
                set_all(usd.spec("newton", path), newton, ["NewtonMeshCollisionAPI"])
            if shell:
                set_all(usd.spec("newton", path), {"newton:massModel": "shell"}, ["NewtonMassAPI"])


def author_collision_groups(usd: MjcfUsd, colliders: dict[int, list[Sdf.Path]]) -> None:
    """CollisionGroups for contype/conaffinity classes that do not all collide (see the module docstring)."""
    model = usd.loaded.model
    if not usd.authored("physics"):
        return
    classes: dict[tuple[int, int], list[Sdf.Path]] = {}
    for geom in sorted(colliders):
        classes.setdefault(contact_class(model, geom), []).extend(colliders[geom])
    ordered = sorted(classes)
    if all(classes_collide(a, b) for a in ordered for b in ordered):
        return
    physics = usd.ctx.stage("physics")
    scope = usd.scope("CollisionGroups")
    physics.DefinePrim(scope, "Scope")
    paths = {cls: scope.AppendChild(f"contype_{cls[0]}_conaffinity_{cls[1]}") for cls in ordered}
    for cls in ordered:
        # UsdPhysics.CollisionGroup and its colliders collection, as its module authors them (not loaded).
        group = physics.DefinePrim(paths[cls], "PhysicsCollisionGroup")
        collection = Usd.CollectionAPI.Apply(group, "colliders")
        collection.CreateIncludesRel().SetTargets(classes[cls])
        filtered = [paths[other] for other in ordered if not classes_collide(cls, other)]
        if filtered:
            group.CreateRelationship("physics:filteredGroups", False).SetTargets(filtered)


def _articulation_trees(usd: MjcfUsd) -> dict[str, int]:
    """Link name → index of its tree (links connected by the Robot's joints)."""
    parent = {link.name: link.name for link in usd.robot.links}

    def find(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for joint in usd.robot.joints:
        if joint.parent is not None:
            parent[find(joint.child)] = find(joint.parent)
    roots = {root: index for index, root in enumerate(sorted({find(name) for name in parent}))}
    return {name: roots[find(name)] for name in parent}


def never_touching_bodies(usd: MjcfUsd, self_collision: bool) -> list[tuple[int, int]]:
    """Pairs of MuJoCo bodies with colliders and a rigid body each that MuJoCo
    never lets touch: both welded to the world, the same weld, a welded parent/child (``filterparent``,
    never with the world), ``<exclude>``, no colliding contype/conaffinity; with ``self_collision`` off,
    also every pair of one articulation. Static links are left out: their colliders belong to no body
    (MuJoCo's decoder would reject a pair naming one), their contype/conaffinity are collision groups."""
    model = usd.loaded.model
    bodies = usd.bodies
    static = {b for b, link in bodies.link_of_body.items() if link in bodies.static}
    colliding = sorted({int(model.geom_bodyid[g]) for g in usd.geoms.collider} - static)
    classes: dict[int, set[tuple[int, int]]] = {}
    for geom in usd.geoms.collider:
        classes.setdefault(int(model.geom_bodyid[geom]), set()).add(contact_class(model, geom))
    filter_parent = not model.opt.disableflags & int(mujoco.mjtDisableBit.mjDSBL_FILTERPARENT)
    weld = model.body_weldid
    tree = _articulation_trees(usd)
    # Each rule's pairs come from groups (same weld, same tree, class signature …), so the work is the
    # number of pairs found, not every pair of bodies (8,000 bodies are 32 million pairs).
    found: set[tuple[int, int]] = set()

    def cross(first: list[int], second: list[int]) -> None:
        found.update((min(a, b), max(a, b)) for a in first for b in second if a != b)

    def within(members: list[int]) -> None:
        found.update(itertools.combinations(sorted(members), 2))

    by_weld: dict[int, list[int]] = {}
    by_tree: dict[int, list[int]] = {}
    by_classes: dict[frozenset, list[int]] = {}
    for body in colliding:
        by_weld.setdefault(int(weld[body]), []).append(body)
        by_tree.setdefault(tree[bodies.link_of_body[body]], []).append(body)
        by_classes.setdefault(frozenset(classes[body]), []).append(body)
    for members in by_weld.values():
        within(members)
    if filter_parent:  # a welded parent/child pair, never with the world
        for welded, members in by_weld.items():
            parent = int(weld[model.body_parentid[welded]])
            if welded != 0 and parent != 0 and parent != welded and parent in by_weld:
                cross(members, by_weld[parent])
    member = set(colliding)
    for signature in model.exclude_signature:
        b1, b2 = int(signature) >> 16, int(signature) & 0xFFFF
        if b1 in member and b2 in member and b1 != b2:
            found.add((min(b1, b2), max(b1, b2)))
    signatures = list(by_classes)
    for i, first in enumerate(signatures):
        for second in signatures[i:]:
            if not any(classes_collide(a, b) for a in first for b in second):
                if first == second:
                    within(by_classes[first])
                else:
                    cross(by_classes[first], by_classes[second])
    if not self_collision:
        for members in by_tree.values():
            within(members)
    return sorted(found)


def colliding_joints(usd: MjcfUsd, never: list[tuple[int, int]]) -> list[str]:
    """Robot joints whose two bodies MuJoCo lets collide (a child of a world-welded body that is not
    excluded): UsdPhysics filters a joint's bodies unless ``physics:collisionEnabled`` says otherwise."""
    model = usd.loaded.model
    body_of = {link: body for body, link in usd.bodies.link_of_body.items()}
    filtered = {frozenset(pair) for pair in never}
    colliders = {int(model.geom_bodyid[g]) for g in usd.geoms.collider}
    names = []
    for joint in usd.robot.joints:
        if joint.parent is None or joint.parent not in body_of or joint.child not in body_of:
            continue
        parent, child = body_of[joint.parent], body_of[joint.child]
        if parent in colliders and child in colliders and frozenset((parent, child)) not in filtered:
            names.append(joint.name)
    return names


def author_filtered_pairs(usd: MjcfUsd, self_collision: bool,
                          never: list[tuple[int, int]] | None = None) -> None:
    """FilteredPairsAPI on the first body of every pair of ``never_touching_bodies``, targeting the other
    (MuJoCo's decoder reads these as ``<exclude>``); ``physics:collisionEnabled`` on the joints whose
    bodies MuJoCo lets collide. never: ``never_touching_bodies(usd, self_collision)`` when the caller has
    it already (None: found here)."""
    if not usd.authored("physics"):
        return
    if never is None:
        never = never_touching_bodies(usd, self_collision)
    for name in colliding_joints(usd, never):
        sdf.attribute(usd.spec("physics", usd.ctx.joint_paths[name]), "physics:collisionEnabled",
                      Sdf.ValueTypeNames.Bool, True)
    targets: dict[int, list[Sdf.Path]] = {}
    for b1, b2 in never:
        targets.setdefault(b1, []).append(usd.body_path(b2))
    for body in sorted(targets):
        spec = usd.spec("physics", usd.body_path(body))
        sdf.apply_schemas(spec, "PhysicsFilteredPairsAPI")
        sdf.relationship(spec, "physics:filteredPairs", targets[body])


def author_contacts(usd: MjcfUsd, self_collision: bool) -> None:
    """Everything of this module, in order."""
    colliders = collider_paths(usd)
    author_physics_materials(usd, colliders)
    author_collision_parameters(usd, colliders)
    author_collision_groups(usd, colliders)
    author_filtered_pairs(usd, self_collision)
    model = usd.loaded.model
    if model.npair:
        names = ", ".join(model.pair(i).name or f"pair{i}" for i in range(model.npair))
        usd.warnings.append(f"explicit contact pairs ({names}) have no UsdPhysics equivalent and are not kept; "
                            "their geoms collide by contype/conaffinity")
