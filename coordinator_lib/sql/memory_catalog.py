"""InMemoryCatalog: a dict-backed catalog that carries out DDL plans itself
(what the adapter does with its durable catalog); tests plan against it.
It sits above the planners whose plans it applies."""

from __future__ import annotations

from coordinator_lib.repr.relation import RelationDesc
from coordinator_lib.sql import plan_iceberg, plans
from coordinator_lib.sql import plan_webhook as w
from coordinator_lib.sql.catalog import DEFAULT_SCHEMA, CatalogItem, DictCatalog, ItemKind
from coordinator_lib.sql.errors import InvalidParameter
from coordinator_lib.sql.plan_continual_task import CreateContinualTaskPlan
from coordinator_lib.sql.plan_postgres import apply_to_catalog
from coordinator_lib.sql.plans import Plan


class InMemoryCatalog(DictCatalog):
    def _apply_webhook(self, plan: Plan) -> list[CatalogItem] | None:
        """Webhook sources and secrets (`plan_webhook.py`); None for other plans."""
        if isinstance(plan, w.CreateWebhookSourcePlan | w.CreateSecretPlan):
            if plan.if_not_exists and plan.name in self._by_name:
                return []
            if isinstance(plan, w.CreateSecretPlan):
                return [self._new(plan.name, ItemKind.SECRET, RelationDesc((), ()))]
            return [self._new(plan.name, ItemKind.SOURCE, plan.desc, depends_on=plan.depends_on)]
        if isinstance(plan, w.AlterSecretPlan):
            return []  # the value lives with the adapter, not in the catalog items
        return None

    def apply(self, plan: Plan) -> list[CatalogItem]:
        """Carry out a DDL plan against this catalog (what the adapter does with
        its durable catalog); returns the items created. Handy in tests."""
        if isinstance(plan, plans.CreateTablePlan):
            if plan.if_not_exists and plan.name in self._by_name:
                return []
            return [self._new(plan.name, ItemKind.TABLE, plan.desc, unique=plan.unique)]
        if isinstance(plan, plans.CreateViewPlan):
            if plan.if_not_exists and plan.name in self._by_name:
                return []
            if plan.replace is not None:
                self.drop([plan.replace], cascade=False)
            kind = ItemKind.MATERIALIZED_VIEW if plan.materialized else ItemKind.VIEW
            return [
                self._new(plan.name, kind, plan.desc, expr=plan.expr, depends_on=plan.depends_on)
            ]
        if isinstance(plan, plans.CreateIndexPlan):
            if plan.if_not_exists and plan.name in self._by_name:
                return []
            target = self.get(plan.on)
            item = self._new(
                plan.name,
                ItemKind.INDEX,
                target.desc,
                on=plan.on,
                key=plan.key,
                depends_on=frozenset({plan.on}),
            )
            return [item]
        if isinstance(plan, plans.CreateSourcePlan):
            if plan.if_not_exists and plan.name in self._by_name:
                return []
            own = plan.subsources.get(next(iter(plan.outputs))) == plan.name
            desc = plan.outputs[next(iter(plan.outputs))] if own else RelationDesc((), ())
            source = self._new(plan.name, ItemKind.SOURCE, desc)
            created = [source]
            for output, name in plan.subsources.items():
                if name != plan.name:
                    created.append(
                        self._new(
                            name,
                            ItemKind.SOURCE,
                            plan.outputs[output],
                            depends_on=frozenset({source.id}),
                        )
                    )
            return created
        if isinstance(plan, plans.DropPlan):
            self.drop(plan.ids, plan.cascade)
            return []
        if isinstance(plan, plans.CreateDatabasePlan):
            if not self.database_exists(plan.name):
                self.databases.add(plan.name)
                self.schemas.add((plan.name, DEFAULT_SCHEMA))  # as Materialize does
            return []
        if isinstance(plan, plans.CreateSchemaPlan):
            self.schemas.add((plan.database, plan.name))
            return []
        if isinstance(plan, plans.DropSchemaPlan):
            self.drop_schema(plan.database, plan.schema, plan.cascade)
            return []
        if isinstance(plan, plans.AlterRenamePlan):
            self.rename(plan.id, plan.new_name)
            return []
        if isinstance(plan, plans.AlterRetainHistoryPlan):
            return []  # nothing here keeps history
        applied = self._apply_webhook(plan)
        if applied is None:
            applied = apply_to_catalog(self, plan)
        if applied is None:
            applied = plan_iceberg.apply_to_catalog(self, plan)
        if applied is not None:
            return applied
        if isinstance(plan, CreateContinualTaskPlan):
            if plan.if_not_exists and plan.name in self._by_name:
                return []
            kind = ItemKind.CONTINUAL_TASK
            return [self._new(plan.name, kind, plan.desc, depends_on=plan.depends_on)]
        raise InvalidParameter(f"InMemoryCatalog cannot apply {type(plan).__name__}")


__all__ = ["InMemoryCatalog"]
