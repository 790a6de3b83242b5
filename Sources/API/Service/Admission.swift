import HTTP

extension OspreyService {
    /// Refuses a request from its headers, before its body is buffered: repository routes check authorization first,
    /// so an unauthenticated upload gets 401/403 at once rather than 413 or a buffered body.
    public var admission: HTTPAdmission {
        let context = self.context
        return { head in
            guard head.path.hasPrefix("/v2/repository/") else { return nil }
            do {
                try context.authorizeAdmin(head)
                return nil
            } catch let error as HTTPErrorConvertible {
                return error.response
            } catch {
                return nil
            }
        }
    }
}
