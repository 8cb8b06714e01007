/**
 * A table's header row: one column header (`scope="col"`) per name in `columns` (a `false` entry
 * is left out, for a column shown only sometimes), then, with `hidden`, a last column whose name
 * only screen readers hear (a row's buttons need a header, not a visible word).
 */
export function TableHead({ columns, hidden }: { columns: ReadonlyArray<string | false>; hidden?: string }) {
  return (
    <thead>
      <tr>
        {columns.map((c) =>
          c === false ? null : (
            <th key={c} scope="col">
              {c}
            </th>
          ),
        )}
        {hidden !== undefined && (
          <th scope="col">
            <span className="visually-hidden">{hidden}</span>
          </th>
        )}
      </tr>
    </thead>
  );
}
